"""Honest comparisons of stored test runs: each run's selection (instances, `-k`), its
significance level, how it ended (finished, or halted with its reason) and its last activity;
each case's statistics, definition hash, baseline tally and p-value, and the `changed` change.

A run stored before ended `finished` if it ended (a run was ended only after its last case);
its last activity is its newest case's, or its start. The suite tables carry no guards, but the
set is installed again at the end both ways, as every migration that rebuilds a table on
SQLite does.
"""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce

from broker import guards


def fill_ends_and_activity(apps, schema_editor):
    SuiteRun = apps.get_model("broker", "SuiteRun")
    SuiteCase = apps.get_model("broker", "SuiteCase")
    SuiteRun.objects.filter(ended_at__isnull=False).update(ended_how="finished")
    newest_case = SuiteCase.objects.filter(run=OuterRef("pk")).order_by("-created_at")
    SuiteRun.objects.update(
        active_at=Coalesce(Subquery(newest_case.values("created_at")[:1]), F("started_at"))
    )
    if schema_editor.connection.vendor == "postgresql":
        # The updates queued the deferred foreign-key checks (the run's baseline); PostgreSQL
        # alters no table with trigger events pending, so they run now, before the index.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0018_versions_and_branches'),
    ]

    operations = [
        # Reversed last: whatever a table rebuilt back took with it is put back.
        migrations.RunPython(migrations.RunPython.noop, guards.install_in_migration),
        migrations.RemoveConstraint(
            model_name='suitecase',
            name='suite_case_change_known',
        ),
        migrations.AddField(
            model_name='suitecase',
            name='baseline_passed_runs',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='baseline_runs',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='definition_hash',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='interval_high',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='interval_low',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='p_value',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='pass_hat_k',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='pass_rate',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='active_at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='alpha',
            field=models.FloatField(default=0.05),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='end_reason',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='ended_how',
            field=models.CharField(blank=True, choices=[('finished', 'Finished'), ('halted', 'Halted')], max_length=10),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='instances',
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name='suiterun',
            name='keyword',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.RunPython(fill_ends_and_activity, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='suitecase',
            name='change',
            field=models.CharField(choices=[('regressed', 'Regressed'), ('fixed', 'Fixed'), ('same', 'Same'), ('new', 'New'), ('changed', 'Changed')], max_length=10),
        ),
        migrations.AddIndex(
            model_name='suiterun',
            index=models.Index(condition=models.Q(('ended_at__isnull', True)), fields=['business', 'active_at'], name='suite_run_running'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('change__in', ['regressed', 'fixed', 'same', 'new', 'changed'])), name='suite_case_change_known'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('interval_high__isnull', True), ('interval_low__isnull', True), ('pass_hat_k__isnull', True), ('pass_rate__isnull', True)), models.Q(('interval_high__gte', models.F('pass_rate')), ('interval_high__isnull', False), ('interval_high__lte', 1), ('interval_low__gte', 0), ('interval_low__isnull', False), ('pass_rate__gte', models.F('interval_low')), ('pass_rate__isnull', False), models.Q(('pass_hat_k__isnull', True), models.Q(('pass_hat_k__gte', 0), ('pass_hat_k__lte', 1)), _connector='OR')), _connector='OR'), name='suite_case_statistics_range'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('p_value__isnull', True), models.Q(('p_value__gte', 0), ('p_value__lte', 1)), _connector='OR'), name='suite_case_p_value_range'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('baseline_passed_runs__isnull', True), ('baseline_runs__isnull', True)), models.Q(('baseline_passed_runs__isnull', False), ('baseline_passed_runs__lte', models.F('baseline_runs')), ('baseline_runs__gte', 1)), _connector='OR'), name='suite_case_baseline_tally'),
        ),
        migrations.AddConstraint(
            model_name='suiterun',
            constraint=models.CheckConstraint(condition=models.Q(('alpha__gt', 0), ('alpha__lt', 1)), name='suite_run_alpha_range'),
        ),
        migrations.AddConstraint(
            model_name='suiterun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('end_reason', ''), ('ended_at__isnull', True), ('ended_how', '')), models.Q(('end_reason', ''), ('ended_at__isnull', False), ('ended_how', 'finished')), models.Q(('ended_at__isnull', False), ('ended_how', 'halted'), models.Q(('end_reason', ''), _negated=True)), _connector='OR'), name='suite_run_ended_how'),
        ),
            migrations.RunPython(guards.install_in_migration, migrations.RunPython.noop),
    ]

"""Stored suite runs: each run of the conversation tests, and the results of its cases."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0010_message_unread'),
    ]

    operations = [
        migrations.CreateModel(
            name='SuiteRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('suites', models.JSONField()),
                ('started_at', models.DateTimeField(auto_now_add=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('baseline', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='compared_runs', to='broker.suiterun')),
                ('business', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='suite_runs', to='broker.business')),
            ],
        ),
        migrations.CreateModel(
            name='SuiteCase',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('suite', models.CharField(max_length=80)),
                ('case', models.CharField(max_length=80)),
                ('instance', models.CharField(blank=True, max_length=100)),
                ('verdict', models.CharField(choices=[('pass', 'Pass'), ('flaky', 'Flaky'), ('fail', 'Fail'), ('error', 'Error')], max_length=10)),
                ('passed_runs', models.PositiveIntegerField()),
                ('runs', models.PositiveIntegerField()),
                ('change', models.CharField(choices=[('regressed', 'Regressed'), ('fixed', 'Fixed'), ('same', 'Same'), ('new', 'New')], max_length=10)),
                ('threads', models.JSONField(default=list)),
                ('failures', models.JSONField(default=list)),
                ('attempts', models.JSONField(default=list)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='cases', to='broker.suiterun')),
            ],
        ),
        migrations.AddIndex(
            model_name='suiterun',
            index=models.Index(fields=['business', 'id'], name='suite_run_business'),
        ),
        migrations.AddConstraint(
            model_name='suiterun',
            constraint=models.CheckConstraint(condition=models.Q(('ended_at__isnull', True), ('ended_at__gte', models.F('started_at')), _connector='OR'), name='suite_run_ends_after_start'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.UniqueConstraint(fields=('run', 'suite', 'case', 'instance'), name='suite_case_unique_per_run'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('verdict__in', ['pass', 'flaky', 'fail', 'error'])), name='suite_case_verdict_known'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('change__in', ['regressed', 'fixed', 'same', 'new'])), name='suite_case_change_known'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('runs__gte', 1), ('runs__lte', 500)), name='suite_case_runs_range'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(('passed_runs__lte', models.F('runs'))), name='suite_case_passed_within_runs'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('suite', ''), _negated=True), models.Q(('case', ''), _negated=True)), name='suite_case_names_not_empty'),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('instance', ''), _negated=True), ('threads', []), _connector='OR'), name='suite_case_instance_of_threads'),
        ),
    ]

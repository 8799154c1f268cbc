"""What each stored case's replies used and cost, as its client counted them: the turns, the
tokens and the amount of those whose usage and price were known, and how many turns had no
usage or no price (all null for a case stored before). The suite tables carry no guards, but
the set is installed again at the end both ways, as every migration that rebuilds a table on
SQLite does.
"""

import django.db.models.expressions
from django.db import migrations, models

from broker import guards


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0019_suite_run_baselines_and_statistics'),
    ]

    operations = [
        # Reversed last: whatever a table rebuilt back took with it is put back.
        migrations.RunPython(migrations.RunPython.noop, guards.install_in_migration),
        migrations.AddField(
            model_name='suitecase',
            name='completion_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='cost_amount',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='cost_turns',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='prompt_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='turns_without_price',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='suitecase',
            name='turns_without_usage',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name='suitecase',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('completion_tokens__isnull', True), ('cost_amount__isnull', True), ('cost_turns__isnull', True), ('prompt_tokens__isnull', True), ('turns_without_price__isnull', True), ('turns_without_usage__isnull', True)), models.Q(('completion_tokens__isnull', False), ('cost_turns__gte', django.db.models.expressions.CombinedExpression(models.F('turns_without_usage'), '+', models.F('turns_without_price'))), ('cost_turns__isnull', False), ('prompt_tokens__isnull', False), ('turns_without_price__isnull', False), ('turns_without_usage__isnull', False), models.Q(models.Q(('cost_amount__isnull', True), ('cost_turns', django.db.models.expressions.CombinedExpression(models.F('turns_without_usage'), '+', models.F('turns_without_price')))), models.Q(('cost_amount__gte', 0), ('cost_amount__isnull', False), ('cost_turns__gt', django.db.models.expressions.CombinedExpression(models.F('turns_without_usage'), '+', models.F('turns_without_price')))), _connector='OR')), _connector='OR'), name='suite_case_cost_counts'),
        ),
        migrations.RunPython(guards.install_in_migration, migrations.RunPython.noop),
    ]

"""Tool calls as steps of a turn (SPEC §7.2): the append-only step table, the turn's step count
and running call, the trail's `step` kind; the guards again, now covering the step table."""

import django.db.models.deletion
from django.db import migrations, models

from broker import guards


def install(apps, schema_editor):
    # As 0004: SQLite and PostgreSQL only, and installing replaces what is there.
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.install(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0013_staff_search'),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install),
        migrations.CreateModel(
            name='Step',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('run', models.CharField(max_length=100)),
                ('call_id', models.CharField(max_length=100)),
                ('round', models.PositiveSmallIntegerField()),
                ('tool', models.CharField(max_length=64)),
                ('arguments', models.JSONField()),
                ('outcome', models.CharField(choices=[('ok', 'Ok'), ('refused', 'Refused'), ('error', 'Error')], max_length=10)),
                ('code', models.CharField(blank=True, default='', max_length=40)),
                ('result', models.JSONField()),
                ('started_at', models.DateTimeField()),
                ('ended_at', models.DateTimeField()),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='trailrow',
            name='trail_kind_known',
        ),
        migrations.AddField(
            model_name='turnprogress',
            name='calling',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='turnprogress',
            name='steps',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='trailrow',
            name='kind',
            field=models.CharField(choices=[('message', 'Message'), ('claim.ended', 'Claim Ended'), ('instance.ended', 'Instance Ended'), ('decision', 'Decision'), ('thread.renamed', 'Thread Renamed'), ('thread.archived', 'Thread Archived'), ('thread.unarchived', 'Thread Unarchived'), ('tester.purged', 'Tester Purged'), ('step', 'Step')], default='message', max_length=20),
        ),
        migrations.AddConstraint(
            model_name='trailrow',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['message', 'claim.ended', 'instance.ended', 'decision', 'thread.renamed', 'thread.archived', 'thread.unarchived', 'tester.purged', 'step'])), name='trail_kind_known'),
        ),
        migrations.AddField(
            model_name='step',
            name='business',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='steps', to='broker.business'),
        ),
        migrations.AddField(
            model_name='step',
            name='claim',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='steps', to='broker.threadclaim'),
        ),
        migrations.AddField(
            model_name='step',
            name='thread',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='steps', to='broker.thread'),
        ),
        migrations.AddField(
            model_name='step',
            name='turn',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='steps', to='broker.message'),
        ),
        migrations.AddIndex(
            model_name='step',
            index=models.Index(fields=['thread', 'id'], name='step_thread'),
        ),
        migrations.AddConstraint(
            model_name='step',
            constraint=models.UniqueConstraint(fields=('turn', 'call_id'), name='one_step_per_call'),
        ),
        migrations.AddConstraint(
            model_name='step',
            constraint=models.CheckConstraint(condition=models.Q(('outcome__in', ['ok', 'refused', 'error'])), name='step_outcome_known'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]

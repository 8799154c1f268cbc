"""Versions and branches (R24): a turn's `version_of`, a thread's `branched_from` and
`branched_at`, all nullable and added in place (rebuilding the message or thread table on SQLite
would trip over the guards that read them); the trail's `turn.edited`, `turn.regenerated` and
`thread.branched` kinds; the guards again, as the trail's table is rebuilt and the thread's
branch columns get theirs.
"""

import django.db.models.deletion
from django.db import migrations, models

from broker import guards


def lift_on_sqlite(apps, schema_editor):
    # Reversed, the new foreign keys are dropped by rebuilding the message and thread tables on
    # SQLite, which the triggers reading them would trip over; the reverse of the first step
    # puts the guards back. PostgreSQL drops the columns in place, and the branch guard with them.
    if schema_editor.connection.vendor == "sqlite":
        guards.uninstall(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0017_thread_activity_and_pins'),
    ]

    operations = [
        # Reversed last: the trail's table rebuilt back loses its guards, put back here.
        migrations.RunPython(migrations.RunPython.noop, guards.install_in_migration),
        migrations.RemoveConstraint(
            model_name='trailrow',
            name='trail_kind_known',
        ),
        migrations.AddField(
            model_name='message',
            name='version_of',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='versions', to='broker.message'),
        ),
        migrations.AddField(
            model_name='thread',
            name='branched_at',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='broker.message'),
        ),
        migrations.AddField(
            model_name='thread',
            name='branched_from',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='branches', to='broker.thread'),
        ),
        migrations.AlterField(
            model_name='trailrow',
            name='kind',
            field=models.CharField(choices=[('message', 'Message'), ('claim.ended', 'Claim Ended'), ('instance.ended', 'Instance Ended'), ('decision', 'Decision'), ('thread.renamed', 'Thread Renamed'), ('thread.archived', 'Thread Archived'), ('thread.unarchived', 'Thread Unarchived'), ('thread.pinned', 'Thread Pinned'), ('thread.unpinned', 'Thread Unpinned'), ('tester.purged', 'Tester Purged'), ('step', 'Step'), ('turn.edited', 'Turn Edited'), ('turn.regenerated', 'Turn Regenerated'), ('thread.branched', 'Thread Branched')], default='message', max_length=20),
        ),
        migrations.AddConstraint(
            model_name='trailrow',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['message', 'claim.ended', 'instance.ended', 'decision', 'thread.renamed', 'thread.archived', 'thread.unarchived', 'thread.pinned', 'thread.unpinned', 'tester.purged', 'step', 'turn.edited', 'turn.regenerated', 'thread.branched'])), name='trail_kind_known'),
        ),
        migrations.RunPython(guards.install_in_migration, lift_on_sqlite),
    ]

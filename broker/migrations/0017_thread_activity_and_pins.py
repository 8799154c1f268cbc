"""The inbox's order: a thread's last activity, stored and indexed, and its pin; the trail's
`thread.pinned` and `thread.unpinned` kinds; the guards again, as the trail's table is rebuilt.

A thread stored before gets as its last activity the time of its newest message, or its
creation when it has none: what the list read before, computed for each thread then.
"""

from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce

from broker import guards


def install(apps, schema_editor):
    # As 0004: SQLite and PostgreSQL only, and installing replaces what is there.
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.install(schema_editor)


def fill_activity(apps, schema_editor):
    Thread = apps.get_model("broker", "Thread")
    Message = apps.get_model("broker", "Message")
    alias = schema_editor.connection.alias
    newest = Message.objects.using(alias).filter(thread=OuterRef("pk")).order_by("-pk")
    Thread.objects.using(alias).update(
        active_at=Coalesce(Subquery(newest.values("created_at")[:1]), F("created_at"))
    )


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0016_threads_and_tasks_never_deleted'),
    ]

    operations = [
        # Reversed last: the trail's table rebuilt back loses its guards, put back here.
        migrations.RunPython(migrations.RunPython.noop, install),
        migrations.RemoveConstraint(
            model_name='trailrow',
            name='trail_kind_known',
        ),
        migrations.AddField(
            model_name='thread',
            name='active_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='pinned_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(fill_activity, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='trailrow',
            name='kind',
            field=models.CharField(choices=[('message', 'Message'), ('claim.ended', 'Claim Ended'), ('instance.ended', 'Instance Ended'), ('decision', 'Decision'), ('thread.renamed', 'Thread Renamed'), ('thread.archived', 'Thread Archived'), ('thread.unarchived', 'Thread Unarchived'), ('thread.pinned', 'Thread Pinned'), ('thread.unpinned', 'Thread Unpinned'), ('tester.purged', 'Tester Purged'), ('step', 'Step')], default='message', max_length=20),
        ),
        migrations.AddIndex(
            model_name='thread',
            index=models.Index(fields=['owner', 'project', 'active_at', 'id'], name='thread_owner_activity'),
        ),
        migrations.AddIndex(
            model_name='thread',
            index=models.Index(condition=models.Q(('pinned_at__isnull', False)), fields=['owner', 'project', 'active_at', 'id'], name='thread_owner_pinned'),
        ),
        migrations.AddConstraint(
            model_name='trailrow',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['message', 'claim.ended', 'instance.ended', 'decision', 'thread.renamed', 'thread.archived', 'thread.unarchived', 'thread.pinned', 'thread.unpinned', 'tester.purged', 'step'])), name='trail_kind_known'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]

"""The inbox: a thread's archive time and read mark, a message's channel, and a
trail row's kind, thread name and channel.

The rows stored before get their kind and thread name from their stored fields, never from
their text: a row naming a message is `message`; one naming neither message nor thread is an
instance's end (`instance.ended`); one in a thread without a message is a decision when its
run routed a decision there (same thread, run and inbox), and a claim's end when a claim of
that thread by the instance it names has ended. The channel of old messages is unknown: null.
"""

from django.db import migrations, models
from django.db.models import Exists, OuterRef, Subquery

# The trail's append-only guard (`broker.guards`), lifted for these updates alone.
SQLITE_GUARD = "broker_trailrow_no_update"
POSTGRESQL_GUARD = "broker_trailrow_append_only"


def label_trail(apps, schema_editor):
    TrailRow = apps.get_model("broker", "TrailRow")
    Thread = apps.get_model("broker", "Thread")
    Decision = apps.get_model("broker", "Decision")
    ThreadClaim = apps.get_model("broker", "ThreadClaim")
    alias = schema_editor.connection.alias
    rows = TrailRow.objects.using(alias)
    decision = Decision.objects.using(alias).filter(
        thread=OuterRef("thread"), from_run=OuterRef("from_run"), route_to=OuterRef("to_role")
    )
    ended_claim = ThreadClaim.objects.using(alias).filter(
        thread=OuterRef("thread"), instance__name=OuterRef("to_role"), ended_at__isnull=False
    )
    outside_messages = rows.filter(message__isnull=True)
    with guard_lifted(schema_editor):
        rows.filter(thread__isnull=False).update(
            thread_name=Subquery(
                Thread.objects.using(alias).filter(pk=OuterRef("thread_id")).values("name")[:1]
            )
        )
        outside_messages.filter(thread__isnull=True).update(kind="instance.ended")
        in_threads = outside_messages.filter(thread__isnull=False)
        in_threads.filter(Exists(decision)).update(kind="decision")
        in_threads.filter(~Exists(decision), Exists(ended_claim)).update(kind="claim.ended")


class guard_lifted:
    """The trail's append-only guard off while inside, and back exactly as it was after."""

    def __init__(self, schema_editor):
        self.connection = schema_editor.connection
        self.restore = []

    def __enter__(self):
        with self.connection.cursor() as cursor:
            if self.connection.vendor == "sqlite":
                cursor.execute(
                    "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = %s",
                    [SQLITE_GUARD],
                )
                found = cursor.fetchone()
                if found:
                    cursor.execute(f"DROP TRIGGER {SQLITE_GUARD}")
                    self.restore = [found[0]]
            elif self.connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                    " WHERE t.tgname = %s AND c.relname = 'broker_trailrow'",
                    [POSTGRESQL_GUARD],
                )
                if cursor.fetchone():
                    cursor.execute(
                        f"ALTER TABLE broker_trailrow DISABLE TRIGGER {POSTGRESQL_GUARD}"
                    )
                    self.restore = [
                        f"ALTER TABLE broker_trailrow ENABLE TRIGGER {POSTGRESQL_GUARD}"
                    ]
        return self

    def __exit__(self, *exc):
        with self.connection.cursor() as cursor:
            if self.connection.vendor == "postgresql":
                # The updates queued the deferred foreign-key checks; PostgreSQL alters no table
                # with trigger events pending, so they run now, before the guard comes back.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for statement in self.restore:
                cursor.execute(statement)
        return False


class Migration(migrations.Migration):
    dependencies = [
        ("broker", "0008_instance_reply_settings"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="via",
            field=models.CharField(
                blank=True,
                choices=[("console", "Console"), ("api", "Api"), ("cli", "Cli")],
                max_length=10,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="thread",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="thread",
            name="read_up_to",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="trailrow",
            name="kind",
            field=models.CharField(
                choices=[
                    ("message", "Message"),
                    ("claim.ended", "Claim Ended"),
                    ("instance.ended", "Instance Ended"),
                    ("decision", "Decision"),
                    ("thread.renamed", "Thread Renamed"),
                    ("thread.archived", "Thread Archived"),
                    ("thread.unarchived", "Thread Unarchived"),
                ],
                default="message",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="trailrow",
            name="thread_name",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="trailrow",
            name="via",
            field=models.CharField(
                blank=True,
                choices=[("console", "Console"), ("api", "Api"), ("cli", "Cli")],
                max_length=10,
                null=True,
            ),
        ),
        migrations.RunPython(label_trail, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="trailrow",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "kind__in",
                        [
                            "message",
                            "claim.ended",
                            "instance.ended",
                            "decision",
                            "thread.renamed",
                            "thread.archived",
                            "thread.unarchived",
                        ],
                    )
                ),
                name="trail_kind_known",
            ),
        ),
    ]

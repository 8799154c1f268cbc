"""How a claim ended, as a typed field (`ThreadClaim.ended_how`) beside the sentence
(`end_reason`): the runner decides on the field, never on the start of the sentence.

The data migration reads the sentences the broker and the runner wrote before the field existed.
"""

from django.db import migrations, models

# (prefix or whole sentence, how), in the order they are tried. The sentences are those of
# `assistant.stop` ("stopped by the human"), `instance.end` ("instance ended by root"), the
# expiry ("lease-expired"), and the runner ("done", "runner stopped", "failed: …").
REASONS = (
    ("stopped by the ", "stopped"),
    ("instance ended by ", "instance-ended"),
    ("lease-expired", "lease-expired"),
    ("failed: ", "failed"),
    ("runner stopped", "shut-down"),
    ("done", "done"),
)


def ended_how(reason: str) -> str:
    """The typed end of a stored sentence. A run could write any sentence before; one that
    matches none was a run releasing its own claim, which decides like `done`."""
    for prefix, how in REASONS:
        if reason.startswith(prefix):
            return how
    return "done"


def fill(apps, schema_editor):
    ThreadClaim = apps.get_model("broker", "ThreadClaim")
    ended = ThreadClaim.objects.using(schema_editor.connection.alias).filter(ended_at__isnull=False)
    for claim in ended.only("pk", "end_reason").iterator():
        ThreadClaim.objects.using(schema_editor.connection.alias).filter(pk=claim.pk).update(
            ended_how=ended_how(claim.end_reason)
        )


class Migration(migrations.Migration):

    dependencies = [
        ("broker", "0004_immutable_owner_and_business"),
    ]

    operations = [
        migrations.AddField(
            model_name="threadclaim",
            name="ended_how",
            field=models.CharField(
                blank=True,
                choices=[
                    ("done", "Done"),
                    ("stopped", "Stopped"),
                    ("instance-ended", "Instance Ended"),
                    ("lease-expired", "Lease Expired"),
                    ("failed", "Failed"),
                    ("shut-down", "Shut Down"),
                ],
                default="",
                max_length=20,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="threadclaim",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("ended_at__isnull", True), ("ended_how", "")),
                    models.Q(
                        ("ended_at__isnull", False),
                        (
                            "ended_how__in",
                            [
                                "done",
                                "stopped",
                                "instance-ended",
                                "lease-expired",
                                "failed",
                                "shut-down",
                            ],
                        ),
                    ),
                    _connector="OR",
                ),
                name="claim_ended_how_when_ended",
            ),
        ),
    ]

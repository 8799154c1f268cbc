"""The inbox's unread count reads a partial index of the messages no person wrote."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("broker", "0009_inbox"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=~models.Q(from_role__in=("human", "tester")),
                fields=["thread", "id"],
                name="message_unread",
            ),
        ),
    ]

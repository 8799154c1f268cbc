"""Install the guards again, with the ones added since 0002: a thread's owner, a project's
business, and a thread's instance once it has messages are immutable (SPEC §3)."""

from django.db import migrations

from broker import guards


def install(apps, schema_editor):
    # As 0002: SQLite and PostgreSQL only, and installing replaces what is there.
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.install(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ("broker", "0003_idempotent_writes"),
    ]

    operations = [
        # The reverse keeps the stricter guards: the older ones refused less, never more.
        migrations.RunPython(install, migrations.RunPython.noop),
    ]

"""Install the database guards of SPEC §3 (append-only tables, R15, thread consistency)."""

from django.db import migrations

from broker import guards


def install(apps, schema_editor):
    # The project runs on SQLite and PostgreSQL only; elsewhere the migration leaves the
    # schema alone rather than half-installing guards.
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.install(schema_editor)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.uninstall(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ("broker", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]

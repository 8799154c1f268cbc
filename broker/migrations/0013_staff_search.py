"""Search at a million rows: on PostgreSQL, trigram indexes that serve a text search
of message bodies and trail rows, the admin's and the Consoles' alike; and a thread's trail rows
by id, on every database.

Django's `icontains` reads `UPPER(column) LIKE UPPER(pattern)` on PostgreSQL, so each index is
on that expression, with `pg_trgm`'s operator class: a search for a word anywhere in a text
reads the index instead of every row. PostgreSQL only: SQLite has no such index (its search
reads the table; docs/decisions/admin.md states the bound), and indexes declared on the models would
be created there too, so these are plain SQL, run on PostgreSQL alone.
"""

from django.db import migrations, models

# (index, table, column): each text a staff or Console search looks into.
SEARCHED = (
    ("message_body_search", "broker_message", "body"),
    ("trail_text_search", "broker_trailrow", "text"),
)


def create_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # A trusted extension since PostgreSQL 13: the database's owner may create it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for index, table, column in SEARCHED:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (UPPER({column}) gin_trgm_ops)"
        )


def drop_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for index, _table, _column in SEARCHED:
        schema_editor.execute(f"DROP INDEX IF EXISTS {index}")


class Migration(migrations.Migration):
    dependencies = [
        ("broker", "0012_tester_purge"),
    ]

    operations = [
        migrations.RunPython(create_search_indexes, drop_search_indexes),
        migrations.AddIndex(
            model_name="trailrow",
            index=models.Index(fields=["thread", "id"], name="trail_thread"),
        ),
    ]

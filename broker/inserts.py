"""Rows inserted in the statements a send makes, built as the ORM builds them.

A send stores a message, its trail row and the thread's `active_at`: on PostgreSQL each
statement is a round trip, and `Model.objects.create` spends more of this process's CPU
building an insert than the database spends running it. Here an unsaved instance gives its
columns and values by the ORM's own steps (each field's `pre_save` and `get_db_prep_save`, as
Django's insert compiler takes them), so what is stored is what `create` would store; the
statement around them is written once, and the instance is marked saved with the id it got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model


@dataclass(frozen=True)
class Insert:
    """One row's INSERT: the table, its columns (quoted) and their values, in order."""

    table: str
    columns: list[str]
    values: list[Any]

    def placeholders(self) -> str:
        return ", ".join(["%s"] * len(self.values))

    def with_column(self, column: str, value: Any) -> Insert:
        quoted = connections[DEFAULT_DB_ALIAS].ops.quote_name(column)
        return Insert(self.table, [*self.columns, quoted], [*self.values, value])


def insert_of(row: Model, *, leave_out: tuple[str, ...] = ()) -> Insert:
    """The INSERT of an unsaved `row`, its id left to the database; columns named in
    `leave_out` (their `attname`) come from elsewhere in the statement. Sets what `pre_save`
    sets on the instance (`auto_now_add` times), as saving it would."""
    # The thread's own connection, looked up once: through Django's `connection` proxy every
    # field's preparation would look it up again.
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    columns, values = [], []
    for field in row._meta.concrete_fields:
        if field.primary_key or field.attname in leave_out:
            continue
        value = field.pre_save(row, add=True)
        columns.append(quote(field.column))
        values.append(field.get_db_prep_save(value, db))
    return Insert(quote(row._meta.db_table), columns, values)


def mark_saved(row: Model, pk: int) -> None:
    """`row` is stored with id `pk`: as `save()` leaves an instance."""
    row.pk = pk
    row._state.adding = False
    row._state.db = DEFAULT_DB_ALIAS

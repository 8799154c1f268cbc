"""The rows of a thread's page, rendered without admin's per-field template.

Admin's tabular inline renders each read-only cell through a template of its own: on a thread's
page — the newest 50 messages of twelve columns, 50 opens, 50 claims — that was most of the
page's time. Here each cell is still what admin shows for it (`AdminReadonlyField.contents`:
the same formatting, empty value and escaping), and the page's template only places them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.contrib.admin.helpers import AdminReadonlyField, InlineAdminFormSet
from django.db.models import Model
from django.utils.safestring import SafeString

register = template.Library()


@dataclass(frozen=True)
class ReadOnlyTable:
    columns: list[dict[str, Any]]
    rows: list[tuple[Model, list[tuple[str, SafeString]]]]


@register.simple_tag
def read_only_table(inline_admin_formset: InlineAdminFormSet) -> ReadOnlyTable:
    """A read-only inline's columns, and each row's object with its cells (the field's name,
    what admin shows for it) in column order."""
    inline: Any = inline_admin_formset.opts
    columns = list(inline_admin_formset.fields())
    names = [str(column["name"]) for column in columns]

    def cells(form: Any) -> list[tuple[str, SafeString]]:
        return [
            (name, AdminReadonlyField(form, name, is_first=False, model_admin=inline).contents())
            for name in names
        ]

    rows = [(form.instance, cells(form)) for form in inline_admin_formset.formset.forms]
    return ReadOnlyTable(columns=columns, rows=rows)

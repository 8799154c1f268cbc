"""The rows of a thread's page, rendered without admin's per-field template (issue 26).

Admin's tabular inline renders each read-only cell through a template of its own: on a thread's
page — the newest 50 messages of twelve columns, 50 opens, 50 claims — that was most of the
page's time. Here each cell is still what admin shows for it (`AdminReadonlyField.contents`:
the same formatting, empty value and escaping), and the page's template only places them.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.admin.helpers import AdminReadonlyField, InlineAdminFormSet
from django.db.models import Model
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag
def read_only_rows(
    inline_admin_formset: InlineAdminFormSet,
) -> list[tuple[Model, list[tuple[str, SafeString]]]]:
    """Each row of a read-only inline: its object, and its cells (the field's name, what
    admin shows for it), in the inline's column order."""
    inline: Any = inline_admin_formset.opts
    names = [str(field["name"]) for field in inline_admin_formset.fields()]

    def cells(form: Any) -> list[tuple[str, SafeString]]:
        return [
            (name, AdminReadonlyField(form, name, is_first=False, model_admin=inline).contents())
            for name in names
        ]

    return [(form.instance, cells(form)) for form in inline_admin_formset.formset.forms]

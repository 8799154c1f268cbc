"""Admin pages bounded by design at any table size.

A list counts its rows only up to COUNT_CAP (a LIMIT inside the count, never a `COUNT(*)` over
a table of a million rows), and a thread's page shows the newest INLINE_ROWS rows of each kind
with a link to the rest, the thread's own list in admin. Both read the rows through the indexes
that order them (`message_thread`: a thread's messages by id; the primary key otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString

from broker import thread_rows

if TYPE_CHECKING:
    AnyPaginator = Paginator[Any]
else:
    # Generic only in the stubs.
    AnyPaginator = Paginator

# The most rows a list or an inline counts; past it, "10,000+".
COUNT_CAP = 10_000
# The rows of one kind a thread's page shows: the newest.
INLINE_ROWS = 50
# The rows a list shows a page.
LIST_ROWS = 50


def capped_count(rows: QuerySet[Any]) -> int:
    """How many `rows` there are, counting no further than COUNT_CAP + 1: the database stops
    reading there (`SELECT COUNT(*) FROM (… LIMIT 10001)`), whatever the table's size."""
    return rows.order_by().values("pk")[: COUNT_CAP + 1].count()


def count_text(count: int) -> str:
    """A capped count for people: `10,000+` once past the cap."""
    return f"{COUNT_CAP:,}+" if count > COUNT_CAP else f"{count:,}"


class CappedCountPaginator(AnyPaginator):
    """A changelist's pages, its count capped (`capped_count`); pages past the cap are reached
    by narrowing the list (filters, search), not by paging through a million rows."""

    @cached_property
    def count(self) -> int:
        # The changelist pages a queryset, never a list.
        return capped_count(cast(QuerySet[Any], self.object_list))

    @property
    def count_text(self) -> str:
        return count_text(self.count)


class NewestRowsFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """A thread's rows of one kind on its page: the newest INLINE_ROWS, oldest first, and a
    link to all of them (`rest_link`) when there are more."""

    def get_queryset(self) -> QuerySet[Any]:
        if not hasattr(self, "_queryset"):
            # The thread's rows, ordered by the inline; the newest read from the end of the
            # (thread, id) index, then shown in the inline's order.
            rows = super().get_queryset()
            thread = thread_rows.in_thread(self.instance.pk)
            newest = self.model._default_manager.filter(thread).order_by(*thread_rows.NEWEST_FIRST)
            rows = rows.filter(pk__in=newest.values("pk")[:INLINE_ROWS])
            self._queryset = rows
        return self._queryset

    @cached_property
    def total(self) -> int:
        """The thread's rows of this kind, capped (`capped_count`)."""
        return capped_count(cast(QuerySet[Any], self.queryset))

    def rest_link(self) -> SafeString | None:
        """A line saying the page shows the newest INLINE_ROWS of how many, linking to all of
        the thread's rows in their own list; None when the page shows them all."""
        if self.total <= INLINE_ROWS:
            return None
        opts = self.model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        total = count_text(self.total)
        return format_html(
            'The newest {} of {}: <a href="{}?{}__id__exact={}">all {} {}</a>',
            INLINE_ROWS,
            total,
            url,
            self.fk.name,
            self.instance.pk,
            total,
            opts.verbose_name_plural,
        )

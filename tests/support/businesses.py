"""A business as the suite makes one: its `assistant` instance, with the shipped lists."""

from __future__ import annotations

from broker.models import Business, Instance, RoleDefinition


def make_business(
    slug: str,
    *,
    human: str,
    tester_enabled: bool = True,
    receive_from: tuple[str, ...] = ("human",),
    send_to: tuple[str, ...] = ("human",),
    cross_role: tuple[str, ...] = (),
) -> Business:
    """A business with one `assistant` instance whose role has the shipped lists."""
    business = Business.objects.create(slug=slug, human=human, tester_enabled=tester_enabled)
    role = RoleDefinition.objects.create(
        business=business,
        name="assistant",
        receive_from=list(receive_from),
        send_to=list(send_to),
        cross_role=list(cross_role),
    )
    Instance.objects.create(business=business, name="assistant", role=role)
    return business

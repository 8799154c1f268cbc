"""`manage.py cluster` refuses what cannot scale out, before it starts anything. The cluster
itself runs in `tests/cluster/` (PostgreSQL and Redis pass)."""

from __future__ import annotations

import socket

import pytest
from django.core.management import CommandError, call_command


def test_cluster_without_redis_is_refused(settings) -> None:
    """Processes share no in-memory channel layer (nor, usefully, a SQLite file)."""
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="PostgreSQL and Redis"):
        call_command("cluster")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--human-ports", "7341,x"], "comma-separated"),
        (["--human-ports", ","], "at least one port"),
        (["--human-ports", "7341,7343"], "port of its own"),
        (["--runners", "0"], "at least 1"),
    ],
)
def test_cluster_bad_arguments_are_refused(arguments: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("cluster", *arguments)


@pytest.mark.postgres
@pytest.mark.redis
def test_cluster_port_in_use_is_refused_before_anything_starts() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(CommandError, match=f"already in use: {port}"):
            call_command("cluster", "--human-ports", str(port), "--tester-port", str(port + 1))

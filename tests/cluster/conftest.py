"""The cluster under test: `manage.py cluster` (two human listeners, one tester listener, the
ops listener, two runners) on a PostgreSQL database of its own reached through a cuttable
proxy, a redis-server of its own, and a fake model. One cluster serves every test of this
package, in file order: the scale-out tests first, then the faults, the killed listener last."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import environ
import pytest

from tests.cluster.services import (
    FakeModelServer,
    RedisServer,
    TcpProxy,
    require_binary,
    wait_until,
)
from tests.console.server import ROOT, drop_scratch_database, free_port
from tests.support.cluster import PASSWORD, Cluster

START_SECONDS = 120.0
RUNNERS = 2


@pytest.fixture(scope="session", autouse=True)
def no_stray_database_sessions() -> Iterator[None]:
    """Overrides the suite's fixture of this name, which ends stray sessions on the test
    database before it is dropped: no test here uses Django's test database, so none is created,
    and that fixture would connect to the configured database (`make faults`' default does not
    exist on a fresh machine). The cluster's own database is made and dropped by `cluster`."""
    yield


def _postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.skip("runs in the PostgreSQL pass (DATABASE_URL=postgres://…)")
    return url


def _through(url: str, proxy: TcpProxy, name: str) -> str:
    config = environ.Env.db_url_config(url)
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    return f"postgres://{config['USER']}{password}@127.0.0.1:{proxy.port}/{name}"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    url = _postgres_url()
    redis = RedisServer(binary=require_binary("redis-server"))
    config = environ.Env.db_url_config(url)
    proxy = TcpProxy(config.get("HOST") or "127.0.0.1", int(config.get("PORT") or 5432))
    model_server = FakeModelServer()
    name = f"mosaic_cluster_{os.getpid()}"
    # Dropped first, so the cluster creates it, as `make cluster` does on a first run.
    drop_scratch_database(url, name)
    workdir = tmp_path_factory.mktemp("cluster")
    log = workdir / "cluster.log"
    ports = [free_port() for _ in range(4)]
    while len(set(ports)) < 4:
        ports = [free_port() for _ in range(4)]
    redis.start()
    proxy.start()
    model = model_server.start()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_HUMAN_")},
        "DATABASE_URL": _through(url, proxy, name),
        "REDIS_URL": redis.url,
        "MOSAIC_DEMO_PASSWORD": PASSWORD,
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": model.url,
        "MOSAIC_ASSISTANT_MODEL": "fake",
        "MOSAIC_CLAIM_LEASE_SECONDS": "5",
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "manage.py", "cluster"),
                *("--human-ports", f"{ports[0]},{ports[1]}", "--tester-port", str(ports[2])),
                *("--runners", str(RUNNERS), "--ops-port", str(ports[3])),
            ],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the teardown can reach every child at once
        )
    started = time.monotonic()
    try:
        wait_until(
            lambda: "cluster: ready" in log.read_text() or process.poll() is not None,
            timeout=START_SECONDS,
            what="cluster ready",
        )
        text = log.read_text(errors="replace")
        assert process.poll() is None, f"cluster exited:\n{text[-4000:]}"
        print(f"cluster: ready {time.monotonic() - started:.1f}s after start")
        pids = {
            label: int(pid)
            for label, pid in re.findall(r"cluster: ([a-z 0-9]+): .*\(pid (\d+)\)", text)
        }
        names = wait_until(
            lambda: (
                (found := re.findall(r"runassistant: (run-[0-9a-f]+) ", log.read_text()))
                and len(found) == RUNNERS
                and found
            ),
            timeout=30,
            what="both runners' names",
        )
        yield Cluster(
            process=process,
            log=log,
            human_urls=[f"http://127.0.0.1:{port}" for port in ports[:2]],
            tester_url=f"http://127.0.0.1:{ports[2]}",
            ops_url=f"http://127.0.0.1:{ports[3]}",
            pids=pids,
            runner_names=names,
            redis=redis,
            database=proxy,
            model=model,
        )
    finally:
        proxy.restore()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        # Shown with a failing test's output.
        print(
            "cluster log (tail):\n" + "\n".join(log.read_text(errors="replace").splitlines()[-80:])
        )
        model_server.stop()
        proxy.stop()
        redis.crash()
        drop_scratch_database(url, name)

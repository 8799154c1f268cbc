"""Production settings (`MOSAIC_PRODUCTION=1`): `check --deploy` is clean, and the settings
refuse to start with an embedded secret, DEBUG, or a plain-HTTP human origin (L2)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from asgiref.sync import async_to_sync

from tests.support.listeners import test_database_kept_open as database_kept_open

ROOT = Path(__file__).resolve().parents[2]
HOST = "bus.example.com"
PASSWORD = "correct horse battery"


def production(database: Path, **overrides: str | None) -> dict[str, str]:
    """The environment of a production deployment on an empty database of its own, with some
    variables changed or removed."""
    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "MOSAIC_PRODUCTION": "1",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": HOST,
        "MOSAIC_HUMAN_ORIGINS": f"https://{HOST}",
        "DEBUG": "0",
        "MOSAIC_ASSISTANT_BACKEND": "offline",
    }
    for name, value in overrides.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return environment


def check_deploy(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_with_production_settings_reports_nothing(tmp_path: Path) -> None:
    result = check_deploy(production(tmp_path / "db.sqlite3"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_on_the_embedded_default_names_what_production_fixes(tmp_path: Path) -> None:
    """The clean report above is earned: without production settings the same check warns."""
    result = check_deploy(
        production(tmp_path / "db.sqlite3", MOSAIC_PRODUCTION="0", MOSAIC_HUMAN_ORIGINS=None)
    )
    assert result.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"SECRET_KEY": None}, "SECRET_KEY"),
        ({"DEBUG": "1"}, "DEBUG"),
        ({"MOSAIC_HUMAN_ORIGINS": f"https://{HOST},http://{HOST}"}, "MOSAIC_HUMAN_ORIGINS"),
        ({"MOSAIC_HUMAN_ORIGINS": None}, "MOSAIC_HUMAN_ORIGINS"),
        ({"MOSAIC_ASSISTANT_BACKEND": None}, "MOSAIC_ASSISTANT_BACKEND"),
    ],
    ids=["no-secret", "debug", "http-origin", "embedded-origins", "implicit-offline-backend"],
)
def test_production_settings_refuse_to_start_when_unsafe(
    overrides, names: str, tmp_path: Path
) -> None:
    result = check_deploy(production(tmp_path / "db.sqlite3", **overrides))
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert names in result.stderr


@pytest.fixture
def production_security(settings) -> None:
    """What MOSAIC_PRODUCTION sets, on this process's settings (the subprocess tests above
    prove the settings module sets exactly these)."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SESSION_COOKIE_SECURE = True
    settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 3600
    settings.ALLOWED_HOSTS = [HOST, "127.0.0.1"]
    settings.MOSAIC_HUMAN_ORIGINS = [f"https://{HOST}"]
    settings.CSRF_TRUSTED_ORIGINS = [f"https://{HOST}"]


def fetch(
    app, url: str, headers: dict[str, str] | None = None, *, json: object = None
) -> httpx.Response:
    """GET `url` from the application, or POST `json` to it."""

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport) as client:
            if json is None:
                return await client.get(url, headers=headers or {})
            return await client.post(url, headers=headers or {}, json=json)

    with database_kept_open():
        return async_to_sync(send)()


def test_production_human_listener_redirects_plain_http_and_sends_hsts(
    production_security, business
) -> None:
    from django.contrib.auth.models import User

    from human.listener import build_human_application
    from mosaic.edge.handler import CallingThread
    from mosaic.edge.listener import http_handler

    app = build_human_application(http_handler(CallingThread()))
    plain = fetch(app, f"http://{HOST}/api/schema")
    assert plain.status_code == 301
    assert plain.headers["location"] == f"https://{HOST}/api/schema"
    User.objects.create_user("ada", password=PASSWORD)
    signed_in = fetch(
        app,
        f"http://{HOST}/api/auth/login",
        {
            "X-Forwarded-Proto": "https",
            "Origin": f"https://{HOST}",
            "Sec-Fetch-Site": "same-origin",
        },
        json={"username": "ada", "password": PASSWORD},
    )
    assert signed_in.status_code == 200, signed_in.text
    assert "max-age=3600" in signed_in.headers["strict-transport-security"]
    cookies = signed_in.headers.get_list("set-cookie")
    assert {c.split("=")[0] for c in cookies} == {"csrftoken", "sessionid"}
    assert all("; secure" in c.lower() for c in cookies)


def test_production_tester_listener_serves_plain_http_on_loopback(
    production_security, settings, business
) -> None:
    """SPEC §5: the tester listener is plain HTTP on loopback; the redirect would break it."""
    from mosaic.edge.handler import CallingThread
    from mosaic.edge.listener import plain_http_handler
    from tester.listener import build_tester_application

    app = build_tester_application(plain_http_handler(CallingThread()))
    port = settings.MOSAIC_TESTER_PORT

    async def from_loopback(scope, receive, send):
        await app({**scope, "server": ("127.0.0.1", port)}, receive, send)

    answer = fetch(from_loopback, f"http://127.0.0.1:{port}/api/chat/projects")
    assert answer.status_code == 200, answer.text
    assert "strict-transport-security" not in answer.headers


def setting_in_a_process(expression: str, **environment: str) -> str:
    """`expression` over `settings`, as a fresh process with `environment` reads it."""
    read = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'mosaic.settings'; "
        f"from django.conf import settings; print({expression})"
    )
    variables = {**os.environ, **environment}
    variables.pop("DJANGO_SETTINGS_MODULE", None)
    answer = subprocess.run(
        [sys.executable, "-c", read], env=variables, capture_output=True, text=True, check=True
    )
    return answer.stdout.strip()


def test_settings_with_redis_share_the_cache_between_listener_processes() -> None:
    """The sign-in throttle counts on Django's cache: with REDIS_URL every listener process
    counts on Redis, never on a memory of its own."""
    backend = setting_in_a_process(
        "settings.CACHES['default']['BACKEND']", REDIS_URL="redis://127.0.0.1:6379/0"
    )
    assert backend == "django.core.cache.backends.redis.RedisCache"

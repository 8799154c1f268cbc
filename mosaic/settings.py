"""Mosaic bus settings, read from the environment (django-environ).

Our own names start with MOSAIC_. Every variable has an embedded default, so a fresh
clone runs on SQLite and the in-memory channel layer with nothing set. `MOSAIC_PRODUCTION=1`
is the deployment behind an HTTPS proxy: it takes the secret from the environment, trusts
https origins only, and sets what `manage.py check --deploy` asks for.
"""

import os
from pathlib import Path

import environ
from csp.constants import NONCE, NONE, SELF
from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

from tester.suites import DEFAULT_PORT as TESTER_DEFAULT_PORT

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

MOSAIC_PRODUCTION = env.bool("MOSAIC_PRODUCTION", default=False)
DEBUG = env.bool("DEBUG", default=False)
if MOSAIC_PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when MOSAIC_PRODUCTION is set.")
if MOSAIC_PRODUCTION:
    # No default: production never signs sessions with a key that is in the source.
    SECRET_KEY = env.str("SECRET_KEY")
else:
    # The embedded default generates nothing secret on disk.
    SECRET_KEY = env.str("SECRET_KEY", default="mosaic-embedded-default-not-for-production")

MOSAIC_HUMAN_HOST = env.str("MOSAIC_HUMAN_HOST", default="127.0.0.1")
MOSAIC_HUMAN_PORT = env.int("MOSAIC_HUMAN_PORT", default=7332)
# The tester listener is loopback only: `serve` refuses any other address.
MOSAIC_TESTER_HOST = env.str("MOSAIC_TESTER_HOST", default="127.0.0.1")
MOSAIC_TESTER_PORT = env.int("MOSAIC_TESTER_PORT", default=TESTER_DEFAULT_PORT)
MOSAIC_HUMAN_ORIGINS = env.list(
    "MOSAIC_HUMAN_ORIGINS",
    default=[
        f"http://127.0.0.1:{MOSAIC_HUMAN_PORT}",
        f"http://localhost:{MOSAIC_HUMAN_PORT}",
    ],
)
if MOSAIC_PRODUCTION and not all(o.startswith("https://") for o in MOSAIC_HUMAN_ORIGINS):
    # L2: in production the human's pages are served over HTTPS only.
    raise ImproperlyConfigured("MOSAIC_HUMAN_ORIGINS must all be https:// in production.")
MOSAIC_CONSOLE_SEND = env.bool("MOSAIC_CONSOLE_SEND", default=True)
MOSAIC_PROXY_USER_HEADER = env.str("MOSAIC_PROXY_USER_HEADER", default="")
MOSAIC_TRUSTED_PROXIES = env.list("MOSAIC_TRUSTED_PROXIES", default=[])
# The ops listener (/metrics, /healthz, /readyz) on 127.0.0.1; 0 starts none (mosaic.ops).
MOSAIC_OPS_PORT = env.int("MOSAIC_OPS_PORT", default=7334)
# L9: the secret the trusted proxy sends in `X-Mosaic-Proxy-Secret` with every request. An
# address alone proves nothing on a shared host: any local process could name the human.
MOSAIC_PROXY_SECRET = env.str("MOSAIC_PROXY_SECRET", default="")
if MOSAIC_PROXY_USER_HEADER.strip() and not MOSAIC_PROXY_SECRET:
    raise ImproperlyConfigured(
        "mosaic.E010: MOSAIC_PROXY_USER_HEADER is set but MOSAIC_PROXY_SECRET is not."
    )
# Sign-in throttle (chat.sign_in_throttle): failed sign-ins allowed per username and per address
# in one window; past either, sign-ins are refused `too-many-requests` until the window ends.
MOSAIC_SIGN_IN_USERNAME_LIMIT = env.int("MOSAIC_SIGN_IN_USERNAME_LIMIT", default=10)
MOSAIC_SIGN_IN_ADDRESS_LIMIT = env.int("MOSAIC_SIGN_IN_ADDRESS_LIMIT", default=50)
MOSAIC_SIGN_IN_WINDOW_SECONDS = env.int("MOSAIC_SIGN_IN_WINDOW_SECONDS", default=900)
MOSAIC_NAME_MAX = env.int("MOSAIC_NAME_MAX", default=200)
MOSAIC_BODY_MAX = env.int("MOSAIC_BODY_MAX", default=32_000)
# A request that finds every HTTP worker (MOSAIC_HTTP_WORKERS, below DATABASES) busy waits at
# most this long, then is answered 503 `unavailable`.
MOSAIC_HTTP_QUEUE_SECONDS = env.float("MOSAIC_HTTP_QUEUE_SECONDS", default=1.0)
# PostgreSQL: the connection pool of each process (workers, sockets' reads, runs).
MOSAIC_DB_POOL_SIZE = env.int("MOSAIC_DB_POOL_SIZE", default=10)
MOSAIC_DB_POOL_TIMEOUT = env.float("MOSAIC_DB_POOL_TIMEOUT", default=2.0)
MOSAIC_CLAIM_LEASE_SECONDS = env.float("MOSAIC_CLAIM_LEASE_SECONDS", default=30.0)
# Runners purge tester data older than this many days, once a day (unset: never).
MOSAIC_TESTER_RETENTION_DAYS: int | None = env.int("MOSAIC_TESTER_RETENTION_DAYS", default=None)
# A stored test run still running with no record and no tester turn in the business for this
# many seconds is halted: its client is gone (`broker.actions.suite_runs.halt_silent_runs`).
MOSAIC_SUITE_RUN_SILENCE_SECONDS = env.float("MOSAIC_SUITE_RUN_SILENCE_SECONDS", default=1800.0)
# SPEC §7.1: a turn is tried at most this many times; after a transient failure the next
# attempt waits the server's Retry-After, or this many seconds doubled per attempt (jittered).
MOSAIC_ASSISTANT_ATTEMPTS = env.int("MOSAIC_ASSISTANT_ATTEMPTS", default=5)
MOSAIC_ASSISTANT_RETRY_SECONDS = env.float("MOSAIC_ASSISTANT_RETRY_SECONDS", default=2.0)
# A streamed reply's draft is stored (and shown) at most this often, in seconds.
MOSAIC_DRAFT_INTERVAL = env.float("MOSAIC_DRAFT_INTERVAL", default=0.1)
# How long a run waits for an instance it consulted (R23) before it gives up on the answer.
MOSAIC_CONSULT_TIMEOUT = env.float("MOSAIC_CONSULT_TIMEOUT", default=120.0)
# How often each socket renews its channel-layer memberships, reads once more and checks its
# sign-in again (ended sign-ins that no signal announced), in seconds.
MOSAIC_RESYNC_SECONDS = env.float("MOSAIC_RESYNC_SECONDS", default=10.0)
# A request body over this many bytes is refused `too-large` before it is read
# (`mosaic.edge.body_limit`); a body within it is held in memory, never spooled to a file.
MOSAIC_REQUEST_MAX_BYTES = env.int("MOSAIC_REQUEST_MAX_BYTES", default=256 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = max(
    MOSAIC_REQUEST_MAX_BYTES, global_settings.FILE_UPLOAD_MAX_MEMORY_SIZE
)
# The business whose tester the tester listener serves.
MOSAIC_TESTER_BUSINESS = env.str("MOSAIC_TESTER_BUSINESS", default="demo")
# SPEC §6.1: the key of the tester's OpenAI-compatible endpoint (`Authorization: Bearer`);
# unset, the endpoint refuses every request. `make run` writes one into .env on first run
# (`manage.py testerkey`). A chat completion waits at most MOSAIC_TESTER_API_WAIT_SECONDS
# without news of its turn, then answers 504; the turn goes on in its thread.
MOSAIC_TESTER_API_KEY = env.str("MOSAIC_TESTER_API_KEY", default="")
MOSAIC_TESTER_API_WAIT_SECONDS = env.float("MOSAIC_TESTER_API_WAIT_SECONDS", default=120.0)
# Assistant runs (SPEC §7): the reply backend, `offline` or `openai` (any OpenAI-compatible
# chat completions endpoint). The key may stay empty for a local model server.
MOSAIC_ASSISTANT_BACKEND = env.str("MOSAIC_ASSISTANT_BACKEND", default="offline")
if MOSAIC_PRODUCTION and "MOSAIC_ASSISTANT_BACKEND" not in os.environ:
    # The offline backend answers every turn with canned text: production may run it only
    # when the deployment says so, never because the variable was forgotten.
    raise ImproperlyConfigured(
        "MOSAIC_ASSISTANT_BACKEND must be set in production (`offline` only on purpose)."
    )
MOSAIC_ASSISTANT_BASE_URL = env.str(
    "MOSAIC_ASSISTANT_BASE_URL", default="https://api.openai.com/v1"
)
MOSAIC_ASSISTANT_MODEL = env.str("MOSAIC_ASSISTANT_MODEL", default="")
MOSAIC_ASSISTANT_API_KEY = env.str("MOSAIC_ASSISTANT_API_KEY", default="")
MOSAIC_ASSISTANT_TIMEOUT = env.float("MOSAIC_ASSISTANT_TIMEOUT", default=60.0)
# The two timeouts of a model request (SPEC §7.1), neither bounding the whole reply: connecting,
# and the longest silence while waiting for the answer or between two streamed chunks. A slow
# model that keeps streaming is never cut off. MOSAIC_ASSISTANT_TIMEOUT, the whole-reply timeout
# of earlier versions, is read as the idle timeout when MOSAIC_ASSISTANT_IDLE_TIMEOUT is unset.
MOSAIC_ASSISTANT_CONNECT_TIMEOUT = env.float("MOSAIC_ASSISTANT_CONNECT_TIMEOUT", default=10.0)
MOSAIC_ASSISTANT_IDLE_TIMEOUT = env.float(
    "MOSAIC_ASSISTANT_IDLE_TIMEOUT", default=MOSAIC_ASSISTANT_TIMEOUT
)
# Sent with each request only when set; unset, the server's defaults apply.
MOSAIC_ASSISTANT_MAX_TOKENS: int | None = env.int("MOSAIC_ASSISTANT_MAX_TOKENS", default=None)
MOSAIC_ASSISTANT_TEMPERATURE: float | None = env.float("MOSAIC_ASSISTANT_TEMPERATURE", default=None)
# The offline backend's pause between two drafts, in seconds, so replies are seen streaming
# with no model (0: no pause).
MOSAIC_OFFLINE_PACE = env.float("MOSAIC_OFFLINE_PACE", default=0.04)

# The model's context window in tokens: the prompt (system, the history that fits, the turn) and
# the room kept for the reply stay within it. 4096 is the window local servers commonly run with
# by default (llama.cpp's server, Ollama); set the model's own window to send it more history.
MOSAIC_ASSISTANT_CONTEXT_TOKENS = env.int("MOSAIC_ASSISTANT_CONTEXT_TOKENS", default=4096)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = MOSAIC_HUMAN_ORIGINS

if MOSAIC_PRODUCTION:
    # TLS ends at the proxy in front of the human listener, which sets X-Forwarded-Proto. The
    # listener binds loopback by default, so only that proxy can reach it with the header.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # The tester listener is plain HTTP on loopback by design and is exempt from the
    # redirect (mosaic.edge.listener.plain_http_handler).
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("MOSAIC_HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("MOSAIC_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("MOSAIC_HSTS_PRELOAD", default=True)

INSTALLED_APPS = [
    # broker first: its management commands (flush) take precedence over Django's.
    "broker",
    # The site: its operational commands (`serve`, `cluster`).
    "mosaic",
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "chat",
    "human",
    "tester",
    # The assistant runner, a client of the broker: `runassistant`.
    "runner",
]

MIDDLEWARE = [
    # First: every later middleware and the resolver work on the listener's own urlconf.
    "mosaic.middleware.ListenerMiddleware",
    # L4 on every tester route, before CSRF: a write there is a chat write or `tester-refused`.
    "tester.middleware.TesterFenceMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy below on every answer, the pages' above all.
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "human.urls"

# Every page's Content-Security-Policy (docs/security.md): defence in depth for the model's
# rendered text. Scripts and styles come from the listener's own static files only, never
# inline; the one inline style (the broker's admin pages, `admin/broker/wrapping.html`) carries
# the request's nonce. `'self'` covers the listener's own WebSocket (ws: or wss:, same host and
# port); images come from it too. Nothing may embed the pages, plug-ins are off, and a `<base>`
# cannot move relative URLs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, NONCE],
        # `data:` for the stylesheets' own drawings (the Console's checkboxes, Swagger UI's
        # icons): such an image loads nothing from anywhere.
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "mosaic.asgi.application"
CSRF_FAILURE_VIEW = "chat.views.csrf_failure"

REST_FRAMEWORK = {
    "EXCEPTION_HANDLER": "chat.errors.exception_handler",
    "DEFAULT_PARSER_CLASSES": ["chat.api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Views get their authentication and gates from the listener that serves them.
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["chat.gates.DenyAll"],
    "UNAUTHENTICATED_USER": None,
    # No OPTIONS self-description: the schema is the description, and same-origin needs no CORS.
    "DEFAULT_METADATA_CLASS": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Mosaic bus chat API",
    "DESCRIPTION": (
        "The chat API of one listener. The human listener needs a signed-in human (session and "
        "CSRF token); the tester listener acts as the tester on every request. Writes need a "
        "JSON body, a trusted Origin and `Sec-Fetch-Site: same-origin`. Every refusal is "
        '`{"error": code, "detail": sentence}`.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # The session is the documented credential; a proxy header is deployment configuration,
    # and the tester listener needs none.
    "AUTHENTICATION_WHITELIST": ["human.gates.HumanSessionAuthentication"],
    # `<id:…>` path segments (chat.routes.IdConverter) are integers of at most 18 digits.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}},
}

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'mosaic.sqlite3'}"),
}
# Concurrent writers: WAL lets readers run beside the writer, and IMMEDIATE takes the write lock
# at BEGIN so two writers queue instead of failing mid-transaction. The listeners and the runner
# checkpoint the log on a thread of their own (broker.checkpoints); a committing connection
# checkpoints only past 10,000 pages of log (about 40 MB).
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=10000;"
    ),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
    DATABASES["default"]["TEST"] = {"NAME": None}
    # Each request runs on one of a few long-lived worker threads (mosaic.edge.handler), which keep
    # their connection; a broken one is noticed and replaced at the next request.
    DATABASES["default"]["CONN_MAX_AGE"] = None
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Connections come from a bounded pool per process (psycopg_pool) and go back to it when a
    # request, a socket's read or a run's step ends: the sum over processes of
    # MOSAIC_DB_POOL_SIZE stays under the server's max_connections (docs/operations.md, Scale-out).
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": MOSAIC_DB_POOL_SIZE,
        # A thread that waits this long for a connection fails `unavailable` (503 / 4503):
        # with the workers fewer than the pool's slots, only an outage makes one wait.
        "timeout": MOSAIC_DB_POOL_TIMEOUT,
        # The pool retries a lost server with doubling delays; giving up after a few seconds
        # lets the next request start afresh at once, so service resumes as soon as the
        # server is back instead of after the last, longest delay.
        "reconnect_timeout": 5.0,
    }

# HTTP requests run on this many long-lived worker threads per listener process. A request is
# mostly Python, which runs one thread at a time: two on SQLite, in the process. On PostgreSQL a
# request also waits on a server across a socket, and two workers took turns through the round
# trips under a business's stream lock; four kept it busy (docs/decisions/speed-and-load.md).
MOSAIC_HTTP_WORKERS = env.int(
    "MOSAIC_HTTP_WORKERS",
    default=4 if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" else 2,
)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's layer with a group send of two round trips instead of four.
            "BACKEND": "mosaic.layers.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 made socket_timeout default to 5 s, shorter than the layer's
                # blocking read: idle consumers would be torn down (channels_redis#422).
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            },
        }
    }
else:
    # One process, the embedded default: Channels' in-memory layer, swept less often.
    CHANNEL_LAYERS = {"default": {"BACKEND": "mosaic.layers.InMemoryChannelLayer"}}

# The cache holds the sign-in throttle's counters. Several listener processes must share them,
# so with Redis (which the channel layer already needs there) the cache is Redis too; the
# embedded single process keeps them in its memory.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "mosaic",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
# Every shape writes times in UTC (SPEC §6; `chat.api.shapes.iso_time`).
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

# `plain` lines, or `json`: one JSON object a line, a request's with all its fields (mosaic.logs).
MOSAIC_LOG_FORMAT = env.str("MOSAIC_LOG_FORMAT", default="plain")
if MOSAIC_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"MOSAIC_LOG_FORMAT is plain or json, not {MOSAIC_LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "mosaic.logs.JsonFormatter"},
    },
    "filters": {
        "quiet_disallowed_host": {"()": "mosaic.logs.QuietDisallowedHost"},
        "quiet_unreadable_body": {"()": "mosaic.logs.QuietUnreadableBody"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if MOSAIC_LOG_FORMAT == "json" else "plain",
        }
    },
    # One handler, on the root: our loggers propagate to it, and servers that configure
    # logging themselves (daphne) find it already set and add no second one.
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "mosaic": {"level": env.str("MOSAIC_LOG_LEVEL", default="INFO")},
        "django.security.DisallowedHost": {"filters": ["quiet_disallowed_host"]},
        # A body Django could not parse (`chat.bodies.UNREADABLE_BODY`): a malformed multipart
        # body is logged on `django.request`, the others on their `django.security` logger.
        **{
            logger: {"filters": ["quiet_unreadable_body"]}
            for logger in (
                "django.request",
                "django.security.SuspiciousMultipartForm",
                "django.security.TooManyFieldsSent",
                "django.security.TooManyFilesSent",
                "django.security.RequestDataTooBig",
            )
        },
    },
}

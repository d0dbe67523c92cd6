"""Tickwork settings.

Everything comes from the environment with an embedded default, so the same code runs as a
single-machine install (SQLite, a filesystem broker, no Redis) and in production (PostgreSQL,
Redis or RabbitMQ). Nothing else in the code base reads the environment.
"""

import json
import os
from datetime import timedelta
from pathlib import Path

from corsheaders.defaults import default_headers as cors_default_headers
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.app_loading import extra_apps
from scheduler_project.databases import databases, env_bool
from scheduler_project.databases import direct as database_direct
from scheduler_project.replica import replica_database

BASE_DIR = Path(__file__).resolve().parent.parent
# A relative TICKWORK_VAR_DIR is taken from the checkout, not from the working directory: the roles
# start in different ones (systemd's is /), and they must share the one folder.
VAR_DIR = BASE_DIR / os.environ.get("TICKWORK_VAR_DIR", "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_json(name: str) -> dict:
    """A JSON object from the environment ({} when unset); bad JSON stops every role at start."""
    raw = os.environ.get(name, "").strip()
    try:
        value = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, not {type(value).__name__}")
    return value


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "tickwork-insecure-development-key-change-me")
if not SECRET_KEY.strip():
    # Set, but to nothing: a production environment file whose key was never filled in
    # (deploy/tickwork.env.example). Every role stops here rather than run on an empty key.
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is empty: set it to 50 or more random characters")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

# Not "daphne": as an app it only makes `runserver` serve ASGI, which nothing here uses (`make run`
# and production start daphne itself), and loading it imports twisted into every process: a quarter
# of each role's start-up CPU.
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "tenants",
    "jobs",
    "pools",
    "executions",
    "events",
    "audit",
    "dispatcher",
    "worker",
    "maintenance",
    "standalone",
    "alerts",
    "web",
    "dashboard",
]
# A team's own apps (handler packages): TICKWORK_APPS and the entry-point group tickwork.apps
# (scheduler_project/app_loading.py; README, "Your own handlers").
TICKWORK_EXTRA_APPS = [app for app in extra_apps(os.environ) if app not in INSTALLED_APPS]
INSTALLED_APPS += TICKWORK_EXTRA_APPS

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Before CommonMiddleware, which refuses a Host not in ALLOWED_HOSTS: a load balancer's probe
    # names the backend's address (web/hosts.py).
    "web.hosts.HealthAnyHostMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "scheduler_project.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "scheduler_project.asgi.application"

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

DATABASES = databases(VAR_DIR)  # scheduler_project/databases.py
# Connection parameters of PostgreSQL itself, for the LISTEN connections, behind a pooler.
DATABASE_DIRECT = database_direct()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "tickwork",
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 defaults socket_timeout to 5 s, which aborts channels-redis's idle
            # 5-second BZPOPMIN and tears every WebSocket down (channels_redis#422): allow more.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}], "prefix": "tickwork"},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
LOGIN_URL = "/admin/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "web.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["web.rest.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "web.rest.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "web.schema.AutoSchema",
    "EXCEPTION_HANDLER": "web.errors.exception_handler",
    "DATETIME_FORMAT": "iso-8601",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tickwork API",
    "DESCRIPTION": "Submit, watch and steer scheduled jobs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's assets come from a pip package, not a CDN: installs may have no internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "web.schema.postprocess",
        # The Error component, If-Match and the answers' headers (README, "HTTP conventions").
        "web.schema_conventions.postprocess",
    ],
    # One name per set of choices that fields of one name share (`state`: a job's, an execution's,
    # a run's; `type`: a job's, a notification channel's), where drf-spectacular would otherwise make
    # hashed names.
    "ENUM_NAME_OVERRIDES": {
        "ExecutionStateEnum": "executions.states.ExecutionState",
        "RunStateEnum": "readmodels.runs.RUN_STATES",
        "JobStateEnum": "jobs.states.JobState",
        "JobTypeEnum": "jobs.models.JobType.values",
        "ChannelTypeEnum": "web.api.alert_serializers.CHANNEL_TYPES",
        # The dead letter group action's name from before a second "action" enum (a backfill's fire).
        "ActionEnum": ["retry", "discard"],
        "BackfillStateEnum": "executions.states.BackfillState",
        "BackfillOrderEnum": "executions.models.BackfillOrder",
        "ReprocessEnum": "executions.models.Reprocess",
        "BackfillFireActionEnum": "executions.models.FireAction",
    },
}

# --- Celery (the transport; the database is the source of truth) --------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem"):
    # kombu's filesystem transport: a broker that needs no server, for the embedded default.
    (VAR_DIR / "broker").mkdir(exist_ok=True)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        # Fanout exchanges (worker control); kombu's default is ./control in the working directory.
        "control_folder": str(VAR_DIR / "broker-control"),
        "store_processed": False,
        # The worker polls the folder; the default second would dominate a job's start lag.
        "polling_interval": 0.1,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {
        # Redis: no broker-side bookkeeping of unacknowledged messages (kombu's ack emulation: a
        # MULTI of HSET and ZADD per delivery, another of ZREM and HDEL per ack, and redelivery
        # after a visibility timeout). The rows are the truth: a message lost with a crashed
        # worker is re-published from its QUEUED row by the sweeper. A third of a worker's
        # parent-process time per message went to this bookkeeping.
        "ack_emulation": env_bool("TICKWORK_REDIS_ACK_EMULATION", False),
    }
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://", "unix://"))
    else {}
)
if CELERY_BROKER_URL.startswith(("amqp://", "amqps://", "pyamqp://")):
    # Queues declared with x-max-priority, so that RabbitMQ serves HIGH before NORMAL before LOW
    # (the message priorities of background/publisher.py: 2, 1, 0). Redis needs no declaration.
    CELERY_TASK_QUEUE_MAX_PRIORITY = 2
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# Early ack: a lost message is re-published from the QUEUED row by the sweeper, and a crashed
# worker's RUNNING row is reclaimed by lease expiry, so broker redelivery would only add loops.
CELERY_TASK_ACKS_LATE = False
CELERY_WORKER_PREFETCH_MULTIPLIER = int(os.environ.get("CELERY_WORKER_PREFETCH_MULTIPLIER", "1"))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery's Django fix-up closes every database connection before and after each task unless this
# is set: a new PostgreSQL connection per execution was most of a short run's cost. It still
# closes them every this many tasks; CONN_MAX_AGE and broken connections are handled by the
# runner's close_old_connections() at the start of each run.
CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000"))
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Tickwork -----------------------------------------------------------------------------------
# Pools known to the system; each is a Celery queue `tickwork.<pool>`. Handlers may add pools.
TICKWORK_POOLS = _env_list("TICKWORK_POOLS", "default")
TICKWORK_MAX_PAYLOAD_BYTES = int(os.environ.get("TICKWORK_MAX_PAYLOAD_BYTES", str(64 * 1024)))
TICKWORK_LEASE_SECONDS = float(os.environ.get("TICKWORK_LEASE_SECONDS", "30"))
TICKWORK_CANCEL_GRACE_SECONDS = float(os.environ.get("TICKWORK_CANCEL_GRACE_SECONDS", "10"))
TICKWORK_PUBLISH_GRACE_SECONDS = float(os.environ.get("TICKWORK_PUBLISH_GRACE_SECONDS", "30"))
# The most runs one message carries when a publish holds more of a pool's runs than it has slots
# (background/publisher.py, worker/batches.py); 1: a message per run. Celery's path through a
# worker costs the same per message whatever it carries.
TICKWORK_MESSAGE_BATCH = int(os.environ.get("TICKWORK_MESSAGE_BATCH", "8"))
# How long a batch's runs may wait behind the ones its slot runs first: past it, those not begun
# go back to the front of their queue for any slot to take.
TICKWORK_BATCH_HAND_BACK_SECONDS = float(os.environ.get("TICKWORK_BATCH_HAND_BACK_SECONDS", "0.05"))
TICKWORK_MISFIRE_GRACE_SECONDS = float(os.environ.get("TICKWORK_MISFIRE_GRACE_SECONDS", "60"))
# A claim's fixed part (the lock, the pools' snapshot, the commit, a broker round trip) is ~15 ms
# on the benchmark's machine: 1,000 a claim dispatch a herd ~20 % faster than 500 (bench/README.md).
# Only a backlog fills a batch; a trickle is claimed a few at a time whatever this says.
TICKWORK_DISPATCH_BATCH = int(os.environ.get("TICKWORK_DISPATCH_BATCH", "1000"))
# PostgreSQL wakes dispatchers with NOTIFY, so polling is only a safety net there; SQLite has no
# such signal, so the dispatcher looks more often.
TICKWORK_POLL_SECONDS = float(
    os.environ.get("TICKWORK_POLL_SECONDS", "1.0" if DATABASES["default"]["ENGINE"].endswith("postgresql") else "0.2")
)
# The least time between two claims of one dispatcher: a burst of creates (each waking it) is
# claimed a few at a time instead of one claim per create. At most this much added start lag.
TICKWORK_CLAIM_SPACING_SECONDS = float(os.environ.get("TICKWORK_CLAIM_SPACING_SECONDS", "0.01"))
# The worker registry (pools/registry.py): a worker reports every BEAT seconds and is offline
# once it has not for OFFLINE seconds.
TICKWORK_WORKER_BEAT_SECONDS = float(os.environ.get("TICKWORK_WORKER_BEAT_SECONDS", "2"))
TICKWORK_WORKER_OFFLINE_SECONDS = float(os.environ.get("TICKWORK_WORKER_OFFLINE_SECONDS", "10"))
# Admission (scheduling/admission.py, dispatcher/buffer.py): a pool admits at least its slots *
# HEADROOM, and up to MAX_BUFFER more messages for short runs; while it holds due work back the
# dispatcher looks again every ADMIT_POLL seconds.
TICKWORK_ADMIT_HEADROOM = float(os.environ.get("TICKWORK_ADMIT_HEADROOM", "2.0"))
TICKWORK_ADMIT_MAX_BUFFER = int(os.environ.get("TICKWORK_ADMIT_MAX_BUFFER", "1000"))
TICKWORK_ADMIT_POLL_SECONDS = float(os.environ.get("TICKWORK_ADMIT_POLL_SECONDS", "0.05"))
TICKWORK_SWEEP_SECONDS = float(os.environ.get("TICKWORK_SWEEP_SECONDS", "2.0"))
# /v1/health answers 503 when no dispatcher has finished a unit of work for this long (a
# dispatcher finishes one at least every poll, TICKWORK_POLL_SECONDS); it says a sweeper missing
# for its bound, without the 503.
TICKWORK_HEALTH_DISPATCHER_SECONDS = float(os.environ.get("TICKWORK_HEALTH_DISPATCHER_SECONDS", "30"))
TICKWORK_HEALTH_SWEEPER_SECONDS = float(os.environ.get("TICKWORK_HEALTH_SWEEPER_SECONDS", "60"))
TICKWORK_HEALTH_ALERTER_SECONDS = float(os.environ.get("TICKWORK_HEALTH_ALERTER_SECONDS", "60"))
TICKWORK_RETENTION_DAYS = int(os.environ.get("TICKWORK_RETENTION_DAYS", "30"))
# What a handler logs during an attempt is kept with it (worker/log_capture.py): at most this many
# lines per attempt (past it one line says how many more were dropped), each cut at this many bytes.
TICKWORK_LOG_LINES_PER_ATTEMPT = int(os.environ.get("TICKWORK_LOG_LINES_PER_ATTEMPT", "1000"))
TICKWORK_LOG_LINE_BYTES = int(os.environ.get("TICKWORK_LOG_LINE_BYTES", "8192"))
TICKWORK_HTTP_ALLOW_PRIVATE = env_bool("TICKWORK_HTTP_ALLOW_PRIVATE", False)
TICKWORK_HTTP_TIMEOUT_SECONDS = float(os.environ.get("TICKWORK_HTTP_TIMEOUT_SECONDS", "10"))
# Celery apps that Tickwork does not own, which the `celery` handler sends tasks to
# (worker/celery_bridge.py; README, "Existing Celery tasks"): JSON, a name per bridge →
# {"broker": URL, "resultBackend": URL (optional, needed by jobs that wait for the result)}.
TICKWORK_CELERY_BRIDGES = _env_json("TICKWORK_CELERY_BRIDGES")
# GET /metrics (web/metrics.py): answered to a staff session, or to `Authorization: Bearer` this
# token when it is set (unset: staff sessions only). Tenant labels: at most this many tenants, the
# rest summed as "_other". A rendering is reused for this long per web process (0: never).
TICKWORK_METRICS_TOKEN = os.environ.get("TICKWORK_METRICS_TOKEN", "")
TICKWORK_METRICS_MAX_TENANTS = int(os.environ.get("TICKWORK_METRICS_MAX_TENANTS", "50"))
TICKWORK_METRICS_CACHE_SECONDS = float(os.environ.get("TICKWORK_METRICS_CACHE_SECONDS", "5"))

# --- Alerts (alerts/, docs/alerts.md) ---------------------------------------------------------------
# The alerter (`manage.py run_alerter`) evaluates every rule this often.
TICKWORK_ALERTS_INTERVAL_SECONDS = float(os.environ.get("TICKWORK_ALERTS_INTERVAL_SECONDS", "5"))
# Global (staff) rules' webhooks are signed with this; a tenant's rules with the tenant's signing secret.
TICKWORK_ALERTS_SIGNING_SECRET = os.environ.get("TICKWORK_ALERTS_SIGNING_SECRET", "")
TICKWORK_ALERTS_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("TICKWORK_ALERTS_WEBHOOK_TIMEOUT_SECONDS", "5"))
# Tries per notification (the pause doubles from 5 s, at most 5 min) before it is FAILED.
TICKWORK_ALERTS_DELIVERY_ATTEMPTS = int(os.environ.get("TICKWORK_ALERTS_DELIVERY_ATTEMPTS", "5"))
# Email (Django's backends). Without EMAIL_HOST the console backend writes messages to the
# alerter's log, so the embedded default needs no mail server.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "tickwork@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"one_line": {"()": "web.hosts.RefusedHostAsOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("TICKWORK_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A request for a host not in ALLOWED_HOSTS: one warning line, not a traceback (web/hosts.py).
        "django.security.DisallowedHost": {"filters": ["one_line"]},
    },
}

# --- Web role: request bodies ---------------------------------------------------------------------
# The largest request body the web role takes in, refused with 413 before it is read (see
# web/request_body.py). Room for a job of the largest payload with its other fields,
# so that the API, not the server, explains an oversized payload.
TICKWORK_MAX_REQUEST_BYTES = int(
    os.environ.get("TICKWORK_MAX_REQUEST_BYTES", str(max(1024 * 1024, 2 * TICKWORK_MAX_PAYLOAD_BYTES)))
)
DATA_UPLOAD_MAX_MEMORY_SIZE = TICKWORK_MAX_REQUEST_BYTES

TICKWORK_DB_RETRY_AFTER_SECONDS = 5  # Retry-After of a 503 when the database is unreachable or full
MIDDLEWARE.insert(1, "web.middleware.DatabaseUnavailableMiddleware")

# --- Deployment hardening (README, "Production deployment") ---------------------------------------
# Off by default, so that the embedded default answers on plain http://127.0.0.1; behind TLS turn
# them on. `manage.py check --deploy` is clean with the README's production variables.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^v1/health$"]  # load balancers' health checks may come over plain HTTP
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", False)
# "HTTP_X_FORWARDED_PROTO,https": a request is secure when the TLS-terminating proxy says so. Set
# it only behind a proxy that overwrites that header, or any client could claim https.
if _proxy_ssl_header := _env_list("DJANGO_SECURE_PROXY_SSL_HEADER", ""):
    SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header)
# Behind a proxy, the WSGI side (gunicorn) takes the client's address from the last entry of
# X-Forwarded-For, the one the proxy appended (daphne's --proxy-headers does this for the ASGI side).
# Only behind a proxy that appends it, or any client could pose as any address to the login throttle.
TICKWORK_PROXY_HEADERS = env_bool("TICKWORK_PROXY_HEADERS", False)
# Scripts only from this site (the dashboard's, the admin's, Swagger UI's from its pip package);
# inline style attributes are allowed (the dashboard's bars, Swagger UI's own), inline scripts not.
CONTENT_SECURITY_POLICY = os.environ.get(
    "DJANGO_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'",
)
MIDDLEWARE.insert(1, "web.middleware.ContentSecurityPolicyMiddleware")
# OpenTelemetry (README, "Tracing"): first, so that its span holds the whole request; it drops
# itself from the chain when no OTEL_* variable asks for traces.
MIDDLEWARE.insert(0, "web.middleware.TracingMiddleware")
# Next, so that every answer carries X-Request-Id and its CORS headers, errors and preflights too.
MIDDLEWARE.insert(1, "corsheaders.middleware.CorsMiddleware")
MIDDLEWARE.insert(1, "web.middleware.RequestIdMiddleware")

# Browser clients on other origins (README, "CORS"): the API only, for the origins listed in
# TICKWORK_CORS_ORIGINS ("https://ops.example.com,https://app.example.com"; none by default).
# No credentials: the API's clients send a token, and a session's cookie stays same-origin.
INSTALLED_APPS.append("corsheaders")
CORS_ALLOWED_ORIGINS = _env_list("TICKWORK_CORS_ORIGINS", "")
CORS_URLS_REGEX = r"^/v1/.*$"
CORS_ALLOW_HEADERS = (*cors_default_headers, "idempotency-key", "if-match", "x-request-id")
CORS_EXPOSE_HEADERS = [
    "ETag",
    "Location",
    "X-Request-Id",
    "Retry-After",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "RateLimit-Policy",
]

# Failed logins (admin and dashboard) are throttled by django-axes: after TICKWORK_LOGIN_FAILURE_LIMIT
# failures for one user name from one address, that pair is refused with 429 (and Retry-After) for
# TICKWORK_LOGIN_LOCKOUT_MINUTES, counted again from each refused try. The counts are rows in the
# database, so every web process sees them. The address is REMOTE_ADDR: behind a proxy, run daphne
# with --proxy-headers so that it is the client's.
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as axes requires
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("TICKWORK_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("TICKWORK_LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # no row per successful login
AXES_LOCKOUT_CALLABLE = "web.middleware.login_locked_out"
# Not its "AXES: BEGIN version …" line at every start: on stderr, above every management command's
# own output and error line (the operators' command line says a mistake in one line).
AXES_VERBOSE = False

# --- Reads on a replica (README, "Reads on a replica"; store/replica/) -----------------------------
# With DATABASE_REPLICA_URL (a streaming replica of DATABASE_URL) the dashboard's pages and the
# API's GETs read it, but a client's for WINDOW seconds after its last write, and all while it lags
# more than MAX_LAG seconds or is down: those read the primary. Everything else uses the primary.
TICKWORK_REPLICA_WINDOW_SECONDS = float(os.environ.get("TICKWORK_REPLICA_WINDOW_SECONDS", "5"))
TICKWORK_REPLICA_MAX_LAG_SECONDS = float(os.environ.get("TICKWORK_REPLICA_MAX_LAG_SECONDS", "3"))
if _replica := replica_database(
    os.environ.get("DATABASE_REPLICA_URL", ""),
    DATABASES["default"],
    window=TICKWORK_REPLICA_WINDOW_SECONDS,
    max_lag=TICKWORK_REPLICA_MAX_LAG_SECONDS,
):
    DATABASES["replica"] = _replica
    DATABASE_ROUTERS = ["store.replica.routing.ReplicaRouter"]
    MIDDLEWARE.insert(MIDDLEWARE.index("axes.middleware.AxesMiddleware"), "web.replica.ReplicaReadsMiddleware")

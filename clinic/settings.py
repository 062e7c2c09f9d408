"""Settings for the clinic service: one module, every deployment value from the environment.

Values are read through the fail-loud helpers of clinic.env. An optional `.env` file in the checkout
is loaded first (real environment variables win; ENV_FILE names another file). See `.env.example`.
"""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

from clinic.env import env_bool, env_int, env_list, env_networks, env_str
from integrations.clients.token_lifetime import token_lifetime

BASE_DIR = Path(__file__).resolve().parent.parent
load_dotenv(os.environ.get("ENV_FILE", BASE_DIR / ".env"), override=False)

# --- Core -----------------------------------------------------------------------------------------

DEBUG = env_bool("DEBUG", default=False)
_INSECURE_DEFAULT_SECRET = "django-insecure-development-only-secret-key-do-not-use-in-production"  # noqa: S105 - refused below when DEBUG is off
SECRET_KEY = env_str("SECRET_KEY", default=_INSECURE_DEFAULT_SECRET)
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS")
if not DEBUG and (SECRET_KEY == _INSECURE_DEFAULT_SECRET or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured(
        "SECRET_KEY is missing, the development default, or shorter than 32 characters, and DEBUG is off. "
        "Set a long random SECRET_KEY (for example: python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
TIME_ZONE = env_str("TIME_ZONE", default="Asia/Kolkata")
USE_TZ = True
LANGUAGE_CODE = "en-us"
USE_I18N = False

INSTALLED_APPS = [
    "clinic.apps.ClinicAdminConfig",  # django.contrib.admin with the two-factor site (clinic.admin_site)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "clinic.apps.ApiTokensConfig",  # oauth2_provider under a plain name in the admin
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "clinic",
    "integrations",
    "patients",
    "appointments",
    "billing",
    "lab",
    "pharmacy",
    "emr",
    "clinic.apps.SignInLockoutsConfig",  # axes under a plain name in the admin
    "django_otp",
    "django_otp.plugins.otp_totp",
]

MIDDLEWARE = [
    "clinic.api.middleware.RequestIdMiddleware",
    "clinic.api.request_metrics.RequestMetricsMiddleware",
    "clinic.tracing.TracingMiddleware",  # a pass-through unless OTEL_EXPORTER_OTLP_ENDPOINT is set
    "django.middleware.security.SecurityMiddleware",
    "clinic.security_headers.SecurityHeadersMiddleware",
    # /healthz, /readyz (and /metrics) whatever the Host: probes address the pod by its IP. After the two
    # above (security headers; neither reads the Host), before everything that does.
    "clinic.api.probes.ProbeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "clinic.api.audit.ApiAuditMiddleware",
    "clinic.api.middleware.ApiErrorMiddleware",
    "clinic.api.anonymous_limit.AnonymousRateLimitMiddleware",
    "clinic.api.hygiene.RequestHygieneMiddleware",
    # Django's browser middleware: clinic.browser_middleware's are the libraries' own, passed through on
    # /api/ and /fhir/ (bearer tokens, no session, cookie or CSRF there). django-axes's check looks for its
    # middleware by name, and it costs a getattr on an API request: it stays as it is.
    "clinic.browser_middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "clinic.browser_middleware.CsrfViewMiddleware",
    "clinic.browser_middleware.AuthenticationMiddleware",
    "clinic.browser_middleware.OTPMiddleware",  # request.user.is_verified(): after AuthenticationMiddleware
    "clinic.browser_middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "clinic.urls"
WSGI_APPLICATION = "clinic.wsgi.application"
ASGI_APPLICATION = "clinic.asgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
APPEND_SLASH = False  # API paths have no trailing slash; a redirect would drop POST bodies

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # clinic/templates first: its admin/ templates override django.contrib.admin's, which is listed
        # before clinic in INSTALLED_APPS (it must be, for the two-factor site to be the default).
        "DIRS": [BASE_DIR / "clinic" / "templates"],
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

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Without collectstatic (development, tests) WhiteNoise serves straight from the app finders, and
# would warn at every start that STATIC_ROOT does not exist yet.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message="No directory at: ")
WHITENOISE_AUTOREFRESH = DEBUG

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    # API client secrets are 256-bit random strings: a keyed hash is as strong as a slow KDF for
    # them and keeps the token endpoint fast (see integrations.clients.hashers).
    "integrations.clients.hashers.ClientSecretHasher",
]

# --- Database ---------------------------------------------------------------------------------------

# The launcher (`make run`, `make test`) exports DATABASE_URL, pointing at the embedded PostgreSQL
# when none is configured; anything else run by hand must configure it.
DATABASE_URL = env_str("DATABASE_URL", default="postgresql://postgres@127.0.0.1:5432/clinic")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgresql://...).")
# Django's PostgreSQL backend with a health check that sends nothing (clinic/database/base.py).
DATABASES["default"]["ENGINE"] = "clinic.database"
DATABASES["default"].setdefault("OPTIONS", {})
# Behind PgBouncer in transaction mode (deploy/kubernetes): consecutive transactions of one Django connection
# may run on different server connections, so nothing may outlive a transaction on the server. Named
# server-side cursors (.iterator()) would be lost between fetches, and psycopg's prepared statements
# (prepared after 5 executions by default) would be missing on the next server connection. Advisory locks
# are taken per transaction already (pg_advisory_xact_lock).
DATABASE_TRANSACTION_POOLING = env_bool("DATABASE_TRANSACTION_POOLING", default=False)
if DATABASE_TRANSACTION_POOLING:
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = None
else:
    # Django turns psycopg's automatic preparation off unless asked; only the precompiled query plans bind on
    # the server (clinic/query_plans.py), so only their statements are prepared, each after 5 runs on a
    # connection (psycopg keeps at most 100 per connection).
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 5)
# An optional streaming replica of the same database (clinic/replica.py): lag-tolerant reads (lists, search,
# the billing summary, FHIR search) go there; everything else, and a request once it wrote, to the primary.
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL", default="")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = dj_database_url.parse(
        DATABASE_REPLICA_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True
    )
    DATABASES["replica"].setdefault("OPTIONS", {})
    DATABASES["replica"]["ENGINE"] = "clinic.database"
    if DATABASE_TRANSACTION_POOLING:
        DATABASES["replica"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        DATABASES["replica"]["OPTIONS"]["prepare_threshold"] = None
    else:
        DATABASES["replica"]["OPTIONS"].setdefault("prepare_threshold", 5)
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}  # tests read the test database through it
    DATABASE_ROUTERS = ["clinic.replica.ReplicaRouter"]
# test_<database>: two checkouts testing against two databases of one server never share a test database.
DATABASES["default"]["TEST"] = {
    "NAME": env_str("TEST_DATABASE_NAME", default=f"test_{DATABASES['default']['NAME'] or 'clinic'}")
}

# --- Redis: cache, Celery broker, rate limits -------------------------------------------------------

# An empty REDIS_URL runs without Redis (development only): an in-process cache and rate limiter,
# and Celery tasks executed in-process. The launcher sets it empty when no Redis answers.
REDIS_URL = env_str("REDIS_URL", default="redis://127.0.0.1:6379/0")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", default="clinic"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL or env_bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True  # a task whose worker dies mid-run is redelivered
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# Two queues (docs/operations.md §1): `celery`, the default, for deliveries, notifications, HL7 sends and
# housekeeping (the `worker` role), and FHIR_EXPORT_QUEUE for Bulk Data exports alone (the `export-worker`
# role): an export holds its worker for minutes, and must never make a webhook wait behind it.
CELERY_TASK_DEFAULT_QUEUE = "celery"
FHIR_EXPORT_QUEUE = "fhir-export"
# The expiry of export files runs where the files are: the export workers mount their volume.
CELERY_TASK_ROUTES = {
    "integrations.tasks.fhir_export_run": {"queue": FHIR_EXPORT_QUEUE},
    "integrations.tasks.fhir_exports_expire": {"queue": FHIR_EXPORT_QUEUE},
}
# Workers and beat log through LOGGING below (request ids, and PostgreSQL's error details redacted), not
# through handlers of Celery's own that would bypass those filters.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "purge-expired-idempotency-keys": {
        "task": "integrations.tasks.purge_idempotency_records",
        "schedule": 3600.0,
    },
    "purge-expired-access-tokens": {"task": "integrations.tasks.purge_expired_tokens", "schedule": 3600.0},
    "flush-deferred-audit-rows": {
        "task": "integrations.tasks.flush_deferred_audit_rows",
        "schedule": 30.0,
        "options": {"expires": 30.0},
    },
    # FHIR Bulk Data export files past FHIR_EXPORT_RETENTION_HOURS.
    "expire-fhir-exports": {"task": "integrations.tasks.fhir_exports_expire", "schedule": 3600.0},
}
# Role heartbeats (clinic.heartbeat): workers and beat refresh theirs in Redis this often; one older than
# three intervals is stale. `manage.py liveness worker|export-worker|beat` and /readyz read them.
CELERY_BEAT_SCHEDULER = "clinic.beat:ClinicScheduler"
ROLE_HEARTBEAT_SECONDS = env_int("ROLE_HEARTBEAT_SECONDS", 10, minimum=1, maximum=300)
# One active beat (clinic.beat): a standby takes over at most this long after the active beat died.
BEAT_LOCK_SECONDS = 3 * ROLE_HEARTBEAT_SECONDS
# Roles /readyz requires a fresh heartbeat of ("worker", "export-worker", "beat"). None by default: a web pod
# must not leave the load balancer because a worker is down (the worker's liveness command restarts it).
READYZ_REQUIRE_ROLES = env_list("READYZ_REQUIRE_ROLES")
if set(READYZ_REQUIRE_ROLES) - {"worker", "export-worker", "beat"}:
    raise ImproperlyConfigured(
        f"READYZ_REQUIRE_ROLES takes worker, export-worker and/or beat, got {READYZ_REQUIRE_ROLES}."
    )

# --- API --------------------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["clinic.api.authentication.ApiClientAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "clinic.api.client_controls.ClientControls",
        "clinic.api.permissions.HasRequiredScope",
    ],
    "DEFAULT_RENDERER_CLASSES": ["clinic.api.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["clinic.api.parsers.JSONParser"],
    "DEFAULT_THROTTLE_CLASSES": [],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "clinic.api.errors.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "COERCE_DECIMAL_TO_STRING": False,
    "DATETIME_FORMAT": "iso-8601",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

# Bodies above this are refused with 413 before they are read (docs/api-rules.md §7); Django's own limit
# for the admin's forms is the same.
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 1024 * 1024, minimum=1024, maximum=100 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
# Requests per minute and client address for unauthenticated traffic: no token, an invalid one, and token
# exchanges without valid client credentials (a secret cannot be guessed faster than this). A request with
# valid client credentials is never refused by it (docs/api-rules.md §3).
ANONYMOUS_RATE_LIMIT = env_int("ANONYMOUS_RATE_LIMIT", 60, minimum=1, maximum=100_000)

API_PAGE_SIZE_DEFAULT = 20
API_PAGE_SIZE_MAX = 100
IDEMPOTENCY_KEY_TTL_SECONDS = 24 * 3600
# A key still "in progress" after this long belongs to a request that died; it may be retried.
IDEMPOTENCY_STALE_AFTER_SECONDS = env_int("IDEMPOTENCY_STALE_AFTER_SECONDS", 120, minimum=5)

# Business identifier of patients, from a PostgreSQL sequence (never reused): PAT-000001.
PATIENT_ID_FORMAT = env_str("PATIENT_ID_FORMAT", default="PAT-{number:06d}")
# Region assumed for phone numbers sent without a country prefix.
PHONE_DEFAULT_REGION = env_str("PHONE_DEFAULT_REGION", default="IN")

ACCESS_TOKEN_EXPIRE_SECONDS = env_int("ACCESS_TOKEN_EXPIRE_SECONDS", 3600, minimum=60, maximum=86400)
API_CLIENT_DEFAULT_RATE_LIMIT = env_int("API_CLIENT_DEFAULT_RATE_LIMIT", 600, minimum=1)
# Token requests (issue and revocation) per client per rolling minute: a budget of their own, apart from the
# client's API budget above. A token lives an hour, so a well-behaved client needs one now and then; this
# only stops a client that asks for a token per call from filling the token table.
TOKEN_RATE_LIMIT = env_int("TOKEN_RATE_LIMIT", 60, minimum=1, maximum=100_000)
# Peers whose X-Forwarded-For is believed (load balancers, reverse proxies). Empty: trust nobody.
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES")

OAUTH2_PROVIDER_APPLICATION_MODEL = "integrations.ApiClient"
OAUTH2_PROVIDER = {
    "SCOPES_BACKEND_CLASS": "integrations.clients.scopes.ApiClientScopes",
    "OAUTH2_VALIDATOR_CLASS": "integrations.clients.oauth.ApiClientValidator",
    # Only the client-credentials grant (and revocation) exist: other grant types are unsupported_grant_type.
    "OAUTH2_SERVER_CLASS": "oauthlib.oauth2.BackendApplicationServer",
    "CLIENT_SECRET_HASHER": "client_secret_hmac",
    "CLIENT_SECRET_GENERATOR_LENGTH": 48,
    "ACCESS_TOKEN_EXPIRE_SECONDS": ACCESS_TOKEN_EXPIRE_SECONDS,
    # oauthlib's token shape (30 of [A-Za-z0-9]) from one read of the random source instead of thirty.
    "ACCESS_TOKEN_GENERATOR": "integrations.clients.token_generator.access_token_generate",
    # Per-client token lifetime; oauthlib calls this with the authenticated request.
    "EXTRA_SERVER_KWARGS": {"token_expires_in": token_lifetime},
    # Store only the SHA-256 checksum of access tokens (RFC 9700 section 4.14).
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    # Bearer tokens only in the Authorization header, never in a query string (RFC 9700 section 4.3.2).
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Clinic Management Integration API",
    "DESCRIPTION": (
        "Patients, appointments and billing across a network of clinic branches. "
        "Authenticate with the OAuth 2.0 client-credentials grant at `POST /api/v1/auth/token`; "
        "every operation names the one scope it requires. Errors are RFC 9457 problem details."
    ),
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    # Relative: the API is described wherever it is served (the document itself is at /api/v1/schema).
    "SERVERS": [{"url": "/", "description": "This server."}],
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "clinic.api.openapi.add_token_endpoints",
    ],
    # Invoices and appointments both have a `status`; each enum gets its own name.
    "ENUM_NAME_OVERRIDES": {
        "InvoiceStatusEnum": "billing.models.Invoice.Status",
        "AppointmentStatusEnum": "appointments.models.Appointment.Status",
        "TaxCategoryEnum": "clinic.lib.tax.TaxCategory",
        "StockMovementKindEnum": "pharmacy.models.MovementKind",
        "KindEnum": "lab.models.TestKind",
        # The payment and refund bodies are one schema per case of the reference rule (clinic.api.schema).
        "PaymentModeEnum": "billing.api.serializers.PAYMENT_MODES",
        "CashPaymentModeEnum": "billing.api.serializers.CASH_MODES",
        "ReferencedPaymentModeEnum": "billing.api.serializers.REFERENCED_MODES",
    },
}

# --- Patient notifications (switched on in the admin: Integrations > Notification settings) --------

# SMS: "console" prints messages to the worker's log (development); "http" posts them to SMS_GATEWAY_URL.
SMS_BACKEND = env_str("SMS_BACKEND", default="console")
if SMS_BACKEND not in ("console", "http"):
    raise ImproperlyConfigured('SMS_BACKEND must be "console" or "http".')
SMS_GATEWAY_URL = env_str("SMS_GATEWAY_URL", default="")
if SMS_BACKEND == "http" and not SMS_GATEWAY_URL:
    raise ImproperlyConfigured("SMS_GATEWAY_URL is required when SMS_BACKEND is http.")
SMS_GATEWAY_TOKEN = env_str("SMS_GATEWAY_TOKEN", default="")
SMS_SENDER_ID = env_str("SMS_SENDER_ID", default="CLINIC")
# E-mail through Django's mail backend: console in development, SMTP when EMAIL_HOST is set.
EMAIL_HOST = env_str("EMAIL_HOST", default="")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    default="django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=True)
EMAIL_TIMEOUT = 15
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", default="appointments@clinic.invalid")
# A failed send is retried this many times in all, a minute apart, before it is left as failed.
NOTIFICATION_MAX_ATTEMPTS = env_int("NOTIFICATION_MAX_ATTEMPTS", 3, minimum=1, maximum=10)
# Notifications go through an outbox (integrations.notifications.outbox): a queued message not finished
# within this lease (a killed worker, a broker down at commit) is queued again by the relay, which runs on
# the webhook relay's interval. Longer than one send on both channels can take (SMS 15 s, SMTP 15 s).
NOTIFICATION_CLAIM_LEASE_SECONDS = env_int("NOTIFICATION_CLAIM_LEASE_SECONDS", 120, minimum=40, maximum=3600)

# --- Security ---------------------------------------------------------------------------------------

FIELD_ENCRYPTION_KEY = env_str("FIELD_ENCRYPTION_KEY", default="")
if not FIELD_ENCRYPTION_KEY and not DEBUG:
    raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY is required when DEBUG is off (a Fernet key).")
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", default=False)

# Webhook delivery (integrations.webhooks). Per attempt: connecting may take this long, the whole
# request and response at most the total (docs/api-rules.md §8: 5 s and 15 s).
WEBHOOK_CONNECT_TIMEOUT_SECONDS = env_int("WEBHOOK_CONNECT_TIMEOUT_SECONDS", 5, minimum=1, maximum=60)
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 15, minimum=1, maximum=120)
# A worker's claim on a delivery expires after this long; the relay then hands the delivery to another
# worker (a worker killed mid-delivery). Longer than an attempt can last, so a live attempt is never doubled.
WEBHOOK_CLAIM_LEASE_SECONDS = env_int("WEBHOOK_CLAIM_LEASE_SECONDS", 60, minimum=2, maximum=3600)
if WEBHOOK_CLAIM_LEASE_SECONDS <= WEBHOOK_TIMEOUT_SECONDS:
    raise ImproperlyConfigured("WEBHOOK_CLAIM_LEASE_SECONDS must be longer than WEBHOOK_TIMEOUT_SECONDS.")
# The relay (Celery beat) picks up due deliveries this often, at most this many per run.
WEBHOOK_RELAY_INTERVAL_SECONDS = env_int("WEBHOOK_RELAY_INTERVAL_SECONDS", 10, minimum=1, maximum=3600)
WEBHOOK_RELAY_BATCH_SIZE = env_int("WEBHOOK_RELAY_BATCH_SIZE", 500, minimum=1, maximum=10_000)
# A receiver's Retry-After is honoured up to this many seconds.
WEBHOOK_RETRY_AFTER_MAX_SECONDS = env_int("WEBHOOK_RETRY_AFTER_MAX_SECONDS", 36_000, minimum=0, maximum=7 * 86400)
# After a secret rotation, deliveries carry a signature with the previous secret too, for this long.
WEBHOOK_SECRET_ROTATION_GRACE_SECONDS = env_int(
    "WEBHOOK_SECRET_ROTATION_GRACE_SECONDS", 86_400, minimum=0, maximum=30 * 86400
)
# Finished webhook events (and their deliveries and attempts) are deleted after this many days.
WEBHOOK_RETENTION_DAYS = env_int("WEBHOOK_RETENTION_DAYS", 30, minimum=1, maximum=3650)
CELERY_BEAT_SCHEDULE["relay-webhook-deliveries"] = {
    "task": "integrations.tasks.relay_webhook_deliveries",
    "schedule": float(WEBHOOK_RELAY_INTERVAL_SECONDS),
    "options": {"expires": float(WEBHOOK_RELAY_INTERVAL_SECONDS)},  # a backlog of relay runs is pointless
}
# Pharmacy (docs/api-rules.md §14): `stock.expiring` is published daily for batches expiring within this many
# days; the beat runs it at 06:00 India time.
PHARMACY_EXPIRY_WARNING_DAYS = env_int("PHARMACY_EXPIRY_WARNING_DAYS", 90, minimum=1, maximum=730)
# HL7 v2 over MLLP (integrations.hl7, docs/operations.md §6). Outbound: a destination's lease is held this long
# beyond its connect and ACK timeouts, renewed before every message; one drain sends for at most
# HL7_DRAIN_SECONDS, then queues the next. Inbound (manage.py hl7_listener): the size limit of one message,
# the time a connection may take to deliver a whole frame (slow senders are closed), and open connections.
HL7_CLAIM_LEASE_SECONDS = env_int("HL7_CLAIM_LEASE_SECONDS", 30, minimum=5, maximum=3600)
HL7_DRAIN_SECONDS = env_int("HL7_DRAIN_SECONDS", 20, minimum=1, maximum=600)
HL7_LISTENER_MAX_MESSAGE_BYTES = env_int(
    "HL7_LISTENER_MAX_MESSAGE_BYTES", 1_048_576, minimum=1024, maximum=16 * 1_048_576
)
HL7_LISTENER_READ_TIMEOUT_SECONDS = env_int("HL7_LISTENER_READ_TIMEOUT_SECONDS", 30, minimum=1, maximum=3600)
HL7_LISTENER_MAX_CONNECTIONS = env_int("HL7_LISTENER_MAX_CONNECTIONS", 64, minimum=1, maximum=10_000)
# One sender address may hold at most this many of them (docs/operations.md §6): it can never crowd out another.
HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS = env_int(
    "HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS", 4, minimum=1, maximum=1_000
)
HL7_LISTENER_PROCESSES = env_int("HL7_LISTENER_PROCESSES", 1, minimum=1, maximum=64)
HL7_LISTENER_APPLICATION = env_str("HL7_LISTENER_APPLICATION", "CLINIC")
HL7_LISTENER_FACILITY = env_str("HL7_LISTENER_FACILITY", "CLINIC")
CELERY_BEAT_SCHEDULE["relay-hl7-messages"] = {
    "task": "integrations.tasks.relay_hl7_messages",
    "schedule": float(WEBHOOK_RELAY_INTERVAL_SECONDS),
    "options": {"expires": float(WEBHOOK_RELAY_INTERVAL_SECONDS)},
}
CELERY_BEAT_SCHEDULE["pharmacy-stock-expiring"] = {
    "task": "pharmacy.tasks.stock_expiring_notify",
    "schedule": crontab(minute=30, hour=0),
}
CELERY_BEAT_SCHEDULE["relay-notifications"] = {
    "task": "integrations.tasks.relay_notifications",
    "schedule": float(WEBHOOK_RELAY_INTERVAL_SECONDS),
    "options": {"expires": float(WEBHOOK_RELAY_INTERVAL_SECONDS)},
}
CELERY_BEAT_SCHEDULE["purge-notification-outbox"] = {
    "task": "integrations.tasks.purge_notification_outbox",
    "schedule": 3600.0,
}
CELERY_BEAT_SCHEDULE["purge-webhook-events"] = {
    "task": "integrations.tasks.purge_webhook_events",
    "schedule": 3600.0,
}

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# HSTS on secure requests (behind a TLS-terminating proxy listed in TRUSTED_PROXIES, X-Forwarded-Proto
# decides what is secure); off in development, where the service is plain http.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0, maximum=2 * 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
# A Content-Security-Policy on the admin and the docs page (clinic.security_headers); on by default with
# DEBUG off, and in development too unless switched off here.
CONTENT_SECURITY_POLICY_ENABLED = env_bool("CONTENT_SECURITY_POLICY", default=True)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if TRUSTED_PROXIES else None

# --- Admin security: login lockout, session length, two-factor -------------------------------------

# django-axes checks every login first: a locked-out user name never reaches the password check.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
# After this many failed logins for one user name from one address, that pair is locked out for the
# cool-off; each further failure meanwhile restarts it. Locking the pair (not the user name alone) keeps
# an attacker from locking every staff member out from anywhere; guessing from many addresses still
# meets the second factor (ADMIN_REQUIRE_2FA) and django-otp's own per-device throttling.
AXES_FAILURE_LIMIT = env_int("ADMIN_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=100)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("ADMIN_LOCKOUT_MINUTES", 15, minimum=1, maximum=24 * 60))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a successful login clears the failures of its user name and address
AXES_CLIENT_IP_CALLABLE = "clinic.admin_site.axes_client_ip"  # X-Forwarded-For only from TRUSTED_PROXIES
AXES_LOCKOUT_TEMPLATE = "admin/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False  # its start-up banner would open every management command's output

# Staff sessions end this many hours after login whatever the activity (clinic.admin_site checks the
# login time), and when the browser closes (shared front-desk computers).
ADMIN_SESSION_HOURS = env_int("ADMIN_SESSION_HOURS", 8, minimum=1, maximum=24)
SESSION_COOKIE_AGE = ADMIN_SESSION_HOURS * 3600
SESSION_EXPIRE_AT_BROWSER_CLOSE = True

# TOTP two-factor for the admin (django-otp): on by default in production. Staff enrol with
# `python manage.py add_totp_device --user <name>` (README, "Admin security").
ADMIN_REQUIRE_2FA = env_bool("ADMIN_REQUIRE_2FA", default=not DEBUG)
OTP_TOTP_ISSUER = env_str("OTP_TOTP_ISSUER", default="Clinic admin")
# The TOTP device admin never shows a stored device's key or QR code again after it is created.
OTP_ADMIN_HIDE_SENSITIVE_DATA = True

# --- Logging: one line per record, with the request id --------------------------------------------

# "json" (one JSON object a line: clinic.json_logging) by default in production, "text" in development;
# both in UTC.
LOG_FORMAT = env_str("LOG_FORMAT", default="text" if DEBUG else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured('LOG_FORMAT must be "json" or "text".')
_LOG_FORMATTERS = {"json": "json", "text": "line"}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "clinic.api.request_id.RequestIdLogFilter"},
        "redact_database_detail": {"()": "clinic.log_redaction.RedactDatabaseDetail"},
    },
    "formatters": {
        "line": {
            "()": "clinic.json_logging.UtcTextFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
        },
        "json": {"()": "clinic.json_logging.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": _LOG_FORMATTERS[LOG_FORMAT],
            "filters": ["request_id", "redact_database_detail"],
        },
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # Django logs every 4xx as a warning with the path; our audit log records requests already.
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
    },
}

# --- FHIR R4 (integrations.fhir, docs/api-rules.md §15) ------------------------------------------------

# Our own identifier systems are `<base>/<name>` (patient-id, branch, lab-order, ...): a stable URI of the
# organisation, never the host a request came to. ABHA numbers use ABDM's system.
FHIR_IDENTIFIER_SYSTEM_BASE = env_str("FHIR_IDENTIFIER_SYSTEM_BASE", default="https://clinic.invalid/fhir/sid")
# Bulk Data $export: where the NDJSON files are written, and how long they are kept after a job completes.
FHIR_EXPORT_DIR = Path(env_str("FHIR_EXPORT_DIR", default=str(BASE_DIR / "var" / "fhir-export")))
FHIR_EXPORT_RETENTION_HOURS = env_int("FHIR_EXPORT_RETENTION_HOURS", 24, minimum=1, maximum=24 * 30)
# Exports one client may have queued or running at once; a kick-off beyond is 429 with Retry-After.
FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT = env_int("FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT", 2, minimum=1, maximum=50)
# A running export is leased to its worker for this long and renewed as it writes (every chunk of rows):
# a worker that died (SIGKILL, OOM, eviction, deploy) lets it run out, and the relay (beat, on the webhook
# relay's interval, default queue) queues the job again, to run from scratch. A job claimed this many times
# in all without finishing fails (docs/fhir.md section 5).
FHIR_EXPORT_LEASE_SECONDS = env_int("FHIR_EXPORT_LEASE_SECONDS", 120, minimum=2, maximum=3600)
FHIR_EXPORT_MAX_ATTEMPTS = env_int("FHIR_EXPORT_MAX_ATTEMPTS", 3, minimum=1, maximum=10)
CELERY_BEAT_SCHEDULE["relay-fhir-exports"] = {
    "task": "integrations.tasks.relay_fhir_exports",
    "schedule": float(WEBHOOK_RELAY_INTERVAL_SECONDS),
    "options": {"expires": float(WEBHOOK_RELAY_INTERVAL_SECONDS)},
}
# How much of what the server emits is checked against the R4 models at run time (integrations.fhir.r4):
# `all` every resource (a large $everything spends more on it than on its SQL),
# `sample` (default) one resource of each type per response and one line per export chunk, which catches a
# mapping that went wrong for a whole type without paying per row, `off` none. The test suite runs `all`,
# so every resource any test makes the server emit is checked in full.
FHIR_VALIDATE_OUTPUT = env_str("FHIR_VALIDATE_OUTPUT", default="sample").strip().lower()
if FHIR_VALIDATE_OUTPUT not in ("all", "sample", "off"):
    raise ImproperlyConfigured(f"FHIR_VALIDATE_OUTPUT must be all, sample or off, got {FHIR_VALIDATE_OUTPUT!r}.")

# --- Operations: metrics, request metrics (docs/operations.md §1) ------------------------------------

# /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`; unset, /metrics is a 404.
METRICS_TOKEN = env_str("METRICS_TOKEN", default="")

# --- DICOM Modality Worklist (manage.py dicom_worklist, integrations.dicom) ----------------------------------
# A C-FIND answers at most this many items (the earliest scheduled first); a modality asks for one day's.
DICOM_WORKLIST_MAX_RESULTS = env_int("DICOM_WORKLIST_MAX_RESULTS", 500, minimum=1, maximum=10_000)
# Seconds a peer may stay silent (association request, DIMSE message, network read) before it is dropped.
DICOM_TIMEOUT_SECONDS = env_int("DICOM_TIMEOUT_SECONDS", 30, minimum=1, maximum=600)
DICOM_MAX_ASSOCIATIONS = env_int("DICOM_MAX_ASSOCIATIONS", 10, minimum=1, maximum=200)
# docs/operations.md §6: the worklist's own AE title (the called AE title every association must name), the
# time a connection has to send its association request (ARTIM), the time an association may stay idle, and
# the associations one calling address may hold.
DICOM_AE_TITLE = env_str("DICOM_AE_TITLE", "CLINIC_MWL")
DICOM_ARTIM_TIMEOUT_SECONDS = env_int("DICOM_ARTIM_TIMEOUT_SECONDS", 10, minimum=1, maximum=600)
DICOM_IDLE_TIMEOUT_SECONDS = env_int("DICOM_IDLE_TIMEOUT_SECONDS", 30, minimum=1, maximum=3600)
DICOM_MAX_ASSOCIATIONS_PER_ADDRESS = env_int("DICOM_MAX_ASSOCIATIONS_PER_ADDRESS", 4, minimum=1, maximum=200)

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models


def _new_signing_secret() -> str:
    return secrets.token_hex(32)


# How long an inbound secret still verifies after it was rotated out: senders move over meanwhile.
INBOUND_ROTATION_GRACE = timedelta(hours=1)
# How long a signing secret still signs after it was rotated out: what Tickwork sends (the `http`
# handler's calls, alert webhooks) carries a signature with each of the two meanwhile, so every
# receiver verifies with either. A day: receivers are other teams' services, configured by hand.
SIGNING_ROTATION_GRACE = timedelta(hours=24)


class Tenant(models.Model):
    """A customer of the scheduler: owns jobs and tokens, and carries its quotas."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    # Share of dispatch capacity relative to other tenants when pools are contended.
    weight = models.PositiveIntegerField(default=1)
    # Null means unlimited.
    max_concurrent_executions = models.PositiveIntegerField(null=True, blank=True)
    max_active_jobs = models.PositiveIntegerField(null=True, blank=True)
    submit_rate_per_minute = models.PositiveIntegerField(null=True, blank=True)
    # Secret for the HMAC signature the built-in `http` handler and alert webhooks put on what
    # they send (`manage.py signing_secret` prints it). After a rotation the previous one signs
    # too, beside it, for SIGNING_ROTATION_GRACE from `signing_secret_rotated_at` (the database's
    # clock). Not editable: the admin never shows or changes them.
    signing_secret = models.CharField(max_length=128, default=_new_signing_secret)
    signing_secret_previous = models.CharField(max_length=128, blank=True, editable=False, db_default="")
    signing_secret_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Secrets that inbound webhooks (POST /v1/hooks/<slug>/<event>) are signed with: made on first
    # use (`manage.py inbound_secret`); after a rotation the previous one still verifies for
    # INBOUND_ROTATION_GRACE from `inbound_secret_rotated_at` (the database's clock), so senders
    # can move over. Not editable: the admin never shows or changes them.
    # db_default too: rows inserted by SQL of their own (the benchmark) need not name them.
    inbound_secret = models.CharField(max_length=128, blank=True, editable=False, db_default="")
    inbound_secret_previous = models.CharField(max_length=128, blank=True, editable=False, db_default="")
    inbound_secret_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="tenants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [models.CheckConstraint(condition=models.Q(weight__gte=1), name="tenant_weight_positive")]

    def __str__(self) -> str:
        return self.slug


class ApiToken(models.Model):
    """A bearer token of one tenant. Only a SHA-256 of the token is stored."""

    PREFIX = "tw_"
    PREFIX_LENGTH = 10  # of the raw token, kept in clear as key_prefix

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True)
    # The first characters, kept in clear so an operator can tell tokens apart.
    key_prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.tenant.slug}:{self.key_prefix}…"

    @staticmethod
    def hash_key(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def prefix_of(cls, raw: str) -> str | None:
        """The prefix kept in clear of a token whose raw value is `raw`; None for a value not of
        a token's form, whose first characters may be someone's other secret."""
        return raw[: cls.PREFIX_LENGTH] if raw.startswith(cls.PREFIX) else None

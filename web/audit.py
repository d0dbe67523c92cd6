"""Every change made through the API leaves one audit row (audit/services.py): who (the token by
its name, prefix and tenant, as a job's versions name it, or the session's user), what, to which
object, how it ended, from which address, under which request id.

A request refused for its credentials (a 401: no token, a wrong, malformed or revoked one) is one
row too, whatever it asked for (`audit_failed_authentication`, from the API's exception handler
and /metrics): its address, path and the token's prefix, if it had one of a token's form.

A view opts in by naming the audited action of each unsafe method (`audit_actions`) and saying
what it acted on (`acting_on`, once it has loaded the object). The row is one INSERT in the
request's own transaction when the request succeeds, so there is no effect without its row; a
refused or failed request is recorded after, with the answer's reason. The row is filed under
the request's id, which every answer carries as `X-Request-Id` (web/middleware.py: the caller's
own, if it sent a valid one), so a caller can find its row.

Events posted to /v1/events (and inbound hooks) are not audited: they are data flowing in, one
per occurrence of something outside, not an actor changing the scheduler; each is kept anyway.
"""

import contextlib
import logging
import uuid
from typing import Any, ClassVar

from django.db import transaction
from django.utils import timezone

from audit.models import ActorKind, AuditOutcome
from audit.services import Actor, Target, audit_record, client_ip, error_lines, outcome_of
from store import store
from tenants.models import ApiToken
from tenants.selectors import token_ever_issued
from web.authentication import TokenPrincipal, actor_of

__all__ = ["AuditedApi", "Target", "api_actor", "audit_failed_authentication", "request_uuid"]

logger = logging.getLogger(__name__)

# What each refused answer means in the log; any other 4xx is a refusal, a 5xx an error.
_OUTCOME_OF_STATUS = {400: AuditOutcome.INVALID, 404: AuditOutcome.NOT_FOUND}


def request_uuid(request) -> uuid.UUID:
    """The id an API request's audit rows are filed under: its X-Request-Id (web/middleware.py)."""
    given = getattr(request, "request_id", None)
    return uuid.UUID(given) if given is not None else uuid.uuid4()


def api_actor(request) -> Actor:
    """Who an API request acts as: its token (no user id) or its session's user."""
    user = request.user
    user_id = None if isinstance(user, TokenPrincipal) else user.pk
    return Actor(user_id=user_id, username=actor_of(request), source_ip=client_ip(request), kind=ActorKind.API)


class AuditedApi:
    """A mixin for an APIView (before it in the bases) whose unsafe methods act."""

    # HTTP method → the audited action ("POST": "job.pause"); other methods are not audited.
    audit_actions: ClassVar[dict[str, str]] = {}
    # What a request that never loaded its object (a 404, a 400 before the lookup) names instead.
    audit_target_type: ClassVar[str] = "job"
    audit_id_kwarg: ClassVar[str] = "job_id"
    _audit_target: Target | None = None
    _audit_detail = ""
    _audit_skip = False

    def acting_on(self, target: Target, detail: str = "") -> None:
        """The object this request acts on (and, on success, what happened to it)."""
        self._audit_target = target
        self._audit_detail = detail

    def not_audited(self) -> None:
        """This request turned out to change nothing (a dry run): no row."""
        self._audit_skip = True

    def dispatch(self, request, *args, **kwargs):
        action = self.audit_actions.get(request.method)
        if action is None:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        self._audit_target = None
        self._audit_detail = ""
        self._audit_skip = False
        request_id = request_uuid(request)
        try:
            with contextlib.ExitStack() as after_commit:
                with transaction.atomic():
                    response = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
                    if response.status_code < 400:
                        # The row and the COMMIT go together (one round trip on PostgreSQL): the
                        # pipeline ends after the transaction, whose commit sends what it holds.
                        # The transaction's on_commit callbacks run inside it: none here touches
                        # the database (they tell the live views), and one that did must not read
                        # a row count, which a pipelined statement has only once synced.
                        after_commit.enter_context(store().pipelined())
                        self._record(action, AuditOutcome.OK, self._audit_detail, request_id, kwargs)
        except Exception as exc:  # a 500: recorded after the rollback, then raised as it was
            self._record_safely(action, *outcome_of(exc), request_id, kwargs)
            raise
        if response.status_code >= 400:
            outcome = _OUTCOME_OF_STATUS.get(response.status_code, AuditOutcome.REFUSED)
            if response.status_code >= 500:
                outcome = AuditOutcome.ERROR
            self._record_safely(action, outcome, _reason(getattr(response, "data", None)), request_id, kwargs)
        return response

    def _record(self, action: str, outcome: str, detail: str, request_id, kwargs: dict[str, Any]) -> None:
        request = self.request  # type: ignore[attr-defined]
        if self._audit_skip or request.user is None or not request.user.is_authenticated:
            # Nothing done, or no actor: a 401's row is audit_failed_authentication's.
            return
        target = self._audit_target
        if target is None:
            # Never the object's tenant: a 404 must not file the attempt under someone else's tenant.
            token_tenant = getattr(request.user, "tenant", None)
            target = Target(
                type=self.audit_target_type,
                id=str(kwargs.get(self.audit_id_kwarg, "")),
                tenant_id=token_tenant.pk if token_tenant is not None else None,
            )
        audit_record(
            actor=api_actor(request),
            action=action,
            target=target,
            outcome=outcome,
            now=timezone.now(),
            detail=detail,
            request_id=request_id,
        )

    def _record_safely(self, action: str, outcome: str, detail: str, request_id, kwargs: dict[str, Any]) -> None:
        """A failure's row must not turn the caller's 4xx into a 500 (the database may be the
        reason the request failed)."""
        try:
            self._record(action, outcome, detail, request_id, kwargs)
        except Exception:
            logger.warning("audit row of a failed API request not written", exc_info=True)


def _reason(data: Any) -> str:
    """Why a request was refused, from its answer's body (web/errors.py): its detail, or each
    invalid field's messages, which an invalid request's detail only sums up."""
    if data is None:
        return ""
    if isinstance(data, dict):
        said = {name: value for name, value in data.items() if name != "code"}
        if data.get("code") == "invalid" and set(said) != {"detail"}:
            said.pop("detail", None)
        if set(said) == {"detail"}:
            return str(said["detail"])
        data = said
    return "; ".join(error_lines(data))


def audit_failed_authentication(request, reason: str) -> None:
    """One row for a request refused for its credentials: from which address, to which path, and
    with which token, by its prefix (a revoked token by its name and tenant, filed under that
    tenant); what security reviews read the log for. Never raises: the caller's 401 stands."""
    parts = request.headers.get("Authorization", "").split()
    raw = parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""  # as the authenticator reads it
    prefix = ApiToken.prefix_of(raw)
    actor, tenant_id = "anonymous", None
    try:
        if prefix is not None:
            actor = f"token {prefix}"
            known = token_ever_issued(raw=raw)
            if known is not None:
                named = f"{known.name} ({known.key_prefix})" if known.name else known.key_prefix
                actor, tenant_id = f"token {named} of {known.tenant.slug}", known.tenant_id
        with transaction.atomic():  # a savepoint: a failed INSERT leaves the caller's transaction usable
            audit_record(
                actor=Actor(user_id=None, username=actor, source_ip=client_ip(request), kind=ActorKind.API),
                action="auth.fail",
                target=Target(type="token", id=prefix or "", tenant_id=tenant_id),
                outcome=AuditOutcome.REFUSED,
                now=timezone.now(),
                detail=f"{request.method} {request.path}: {reason}",
                request_id=request_uuid(request),  # the 401's X-Request-Id, as an action's row is
            )
    except Exception:
        logger.warning("audit row of a failed authentication not written", exc_info=True)

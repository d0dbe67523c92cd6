"""The API's HTTP conventions that live in headers (README, "HTTP conventions"): a job's `ETag`
and `If-Match`, the `RateLimit-*` headers of a tenant's submit rate, and `Location` on a 201.
(`X-Request-Id` is web/middleware.py's, for every response.)

A job's ETag is the version its definition is at (jobs.versions), quoted: `"3"`. It changes when
the definition does (PUT, PATCH, a restore), which is what two editors of one job must not
overwrite in each other's back; a pause or resume changes the job's state, not its definition,
and keeps it. A request's `If-Match` names the versions it was made for, checked under the job's
row lock by the service (scheduling.job_changes.StaleVersion: 412).
"""

import re
from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from rest_framework.exceptions import ValidationError

from tenants.services import SubmitRate

# What If-Match may hold (RFC 9110 8.8.3, 13.1.1): `*`, or entity tags separated by commas, each
# `"…"` of visible characters but a quote, or a weak `W/"…"` (which never matches: If-Match
# compares strongly). The schema states the same pattern (web/schema_conventions.py).
IF_MATCH_PATTERN = r'^(\*|(W/)?"[!#-~]*"([ \t]*,[ \t]*(W/)?"[!#-~]*")*)$'
_ENTITY_TAG = re.compile(r'(W/)?"([!#-~]*)"')


def etag(version: int) -> str:
    return f'"{version}"'


def if_match(headers: Mapping[str, str]) -> frozenset[int] | None:
    """The versions a request's If-Match accepts: None without one, or with `*` (any current
    version: the job exists, or it would be a 404). Otherwise a set, maybe empty: a weak tag, or a
    tag that is not a version's number, matches no version. A header of another form is a 400
    naming it."""
    raw = headers.get("If-Match")
    if raw is None:
        return None
    raw = raw.strip(" \t")
    if not re.fullmatch(IF_MATCH_PATTERN, raw):
        raise ValidationError({"If-Match": ['must be * or entity tags, as an ETag gives them: "3"']})
    if raw == "*":
        return None
    return frozenset(
        int(opaque) for weak, opaque in _ENTITY_TAG.findall(raw) if not weak and opaque.isdigit() and len(opaque) < 19
    )


def rate_limit_headers(rate: SubmitRate | None) -> dict[str, str]:
    """Where the tenant stands in its submit rate (draft-ietf-httpapi-ratelimit-headers): the
    limit, what is left of it, and the seconds until the window starts afresh; none without a rate."""
    if rate is None:
        return {}
    return {
        "RateLimit-Limit": str(rate.limit),
        "RateLimit-Remaining": str(rate.remaining),
        "RateLimit-Reset": str(rate.reset),
        "RateLimit-Policy": f"{rate.limit};w={rate.window}",
    }


def location(request: Any, view_name: str, **kwargs: Any) -> str:
    """The absolute URL of what a 201 created, written as the lists' `next` links are."""
    return request.build_absolute_uri(reverse(view_name, kwargs=kwargs))

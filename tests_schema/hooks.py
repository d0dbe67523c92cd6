"""schemathesis hooks for tests_schema/ (loaded by SCHEMATHESIS_HOOKS=tests_schema.hooks).

What the schema cannot enumerate, a valid (positive) request still has to name rightly, and these
hooks name it so; a negative one is left as generated.

- The test's token is a tenant's, and a token writes only in its own tenant: a body naming another
  `tenant` is refused, rightly, with a 400 naming it. Every phase generates `tenant` as any slug
  ("0" in each of the coverage phase's bodies), so left alone no valid body could ever name one. A
  valid body that names a tenant names the token's, TICKWORK_SCHEMATHESIS_TENANT.
- A timezone is a string in the schema, not an enum of one server's tz database (web/schema.py),
  so a generated one is almost never a zone the server knows, and a valid preview query or job body
  would be refused every time. One the server does not know becomes UTC.
- A schedule preview takes a cron `schedule` or an interval's `everySec`, one of them, `startAt`
  only with `everySec`, and a `seed` with a hashed (`H`) schedule: rules between parameters that
  OpenAPI 3.0 cannot state, and that a generated query mostly breaks. A valid one is made to keep
  them (the schedule when both are given, the schema's example when neither is).
- Some of a job's fields are only for some types (400 naming the field on another): `startAt`,
  `catchupWindowSec` and `pauseAfterFailures` for CRON and INTERVAL jobs, `filter`, `debounceSec`
  and `debounceMaxSec` for EVENT jobs. Rules between fields that the schema cannot state, and that
  one in every few of a bulk body's items would break, refusing the whole batch: a valid body
  leaves out what its type does not take.
- A target's `handler`, `pool` and `rateLimit` name what this server runs and its operator
  defined (strings in the schema: they differ between servers), so a generated one is almost never
  known, and one bulk item in a few would refuse the batch: a valid target names `noop` (it takes
  any payload) unless it names another built-in handler, the pool `default`, and the limit
  tests_schema/seed.py defines, RATE_LIMIT."""

import os
import zoneinfo

import schemathesis
from schemathesis import GenerationMode

TENANT = os.environ.get("TICKWORK_SCHEMATHESIS_TENANT", "")
RATE_LIMIT = "schemathesis"
BUILT_IN_HANDLERS = {"noop", "sleep", "fail", "http", "celery"}
ZONES = zoneinfo.available_timezones()
# The fields only some types take (web/api/job_serializers.py refuses them on the others).
ONLY_FOR = {
    "startAt": ("CRON", "INTERVAL"),
    "catchupWindowSec": ("CRON", "INTERVAL"),
    "pauseAfterFailures": ("CRON", "INTERVAL"),
    "filter": ("EVENT",),
    "debounceSec": ("EVENT",),
    "debounceMaxSec": ("EVENT",),
}


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or meta.generation.mode is not GenerationMode.POSITIVE:
        return case
    body = case.body
    items = [body, *(body.get("jobs") or [])] if isinstance(body, dict) else []
    for item in items:
        if not isinstance(item, dict):
            continue
        if TENANT and isinstance(item.get("tenant"), str):
            item["tenant"] = TENANT
        if isinstance(item.get("timezone"), str) and item["timezone"] not in ZONES:
            item["timezone"] = "UTC"
        for name, types in ONLY_FOR.items():
            if item.get("type") not in types:
                item.pop(name, None)
        steps = (item.get("workflow") or {}).get("steps") if isinstance(item.get("workflow"), dict) else None
        for target in [item.get("target"), *(step.get("target") for step in steps or [] if isinstance(step, dict))]:
            if not isinstance(target, dict):
                continue
            if isinstance(target.get("handler"), str) and target["handler"] not in BUILT_IN_HANDLERS:
                target["handler"] = "noop"
            if isinstance(target.get("pool"), str):
                target["pool"] = "default"
            if isinstance(target.get("rateLimit"), str):
                target["rateLimit"] = RATE_LIMIT
    query = case.query
    if isinstance(query, dict) and isinstance(query.get("timezone"), str) and query["timezone"] not in ZONES:
        query["timezone"] = "UTC"
    if isinstance(query, dict) and case.path == "/v1/schedule/preview":
        _one_recurrence(query)
    return case


def _one_recurrence(query: dict) -> None:
    if "schedule" in query:
        query.pop("everySec", None)
        query.pop("startAt", None)
        if "H" in str(query["schedule"]).upper():
            query.setdefault("seed", "job")
    elif "everySec" not in query:
        query["schedule"] = "30 2 * * *"
        query.pop("startAt", None)

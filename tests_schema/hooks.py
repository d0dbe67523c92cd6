"""schemathesis hooks for tests_schema/ (loaded by SCHEMATHESIS_HOOKS=tests_schema.hooks).

The test's token is a tenant's, and a token writes only in its own tenant: a body naming another
`tenant` is refused, rightly, with a 400 naming it. Every phase generates `tenant` as any slug
("0" in each of the coverage phase's bodies), so left alone no valid body could ever name one. A
valid (positive) body that names a tenant names the token's, TICKWORK_SCHEMATHESIS_TENANT; a
negative one is left as generated."""

import os

import schemathesis
from schemathesis import GenerationMode

TENANT = os.environ.get("TICKWORK_SCHEMATHESIS_TENANT", "")


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if not TENANT or meta is None or meta.generation.mode is not GenerationMode.POSITIVE:
        return case
    body = case.body
    items = [body, *(body.get("jobs") or [])] if isinstance(body, dict) else []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("tenant"), str):
            item["tenant"] = TENANT
    return case

"""Request examples for the schema (/v1/docs shows them; a generated client and schemathesis's
examples phase send them): bodies the API accepts as they are, for any tenant and any job."""

from drf_spectacular.utils import OpenApiExample

_NOOP = {"handler": "noop"}

JOB_BODIES = {
    "A cron job in its timezone": {
        "name": "nightly report",
        "type": "CRON",
        "schedule": "30 2 * * *",
        "timezone": "Europe/London",
        "target": {"handler": "http"},
        "payload": {"url": "https://reports.example.com/nightly", "method": "POST"},
        "retryPolicy": {"maxAttempts": 5, "backoff": "EXPONENTIAL", "initialDelayMs": 1000, "maxDelayMs": 60000},
    },
    "A one-off job": {
        "name": "send invoice 1042",
        "type": "ONCE",
        "runAt": "2031-03-14T09:00:00Z",
        "target": _NOOP,
        "payload": {"invoice": 1042},
    },
    "A delayed job": {"name": "reminder", "type": "DELAYED", "delaySec": 3600, "target": _NOOP, "priority": "HIGH"},
    "An interval job": {"name": "poll feed", "type": "INTERVAL", "everySec": 900, "target": _NOOP},
    "An event job": {
        "name": "on paid invoices in EUR",
        "type": "EVENT",
        "on": "invoice.paid",
        "filter": {"currency": "EUR"},
        "target": _NOOP,
    },
    "A workflow of steps": {
        "name": "nightly etl",
        "type": "CRON",
        "schedule": "0 3 * * *",
        "workflow": {
            "steps": [
                {"name": "extract", "target": _NOOP, "payload": {"day": "yesterday"}},
                {"name": "load", "target": _NOOP, "dependsOn": ["extract"], "retryPolicy": {"maxAttempts": 5}},
            ]
        },
    },
}

JOB_CREATE = [OpenApiExample(name, value=body, request_only=True) for name, body in JOB_BODIES.items()]
JOB_BULK = [
    OpenApiExample(
        "Two jobs",
        value={"jobs": [JOB_BODIES["A one-off job"], JOB_BODIES["A delayed job"]]},
        request_only=True,
    )
]
# What any job may change, whatever its type and whether it runs a target or a workflow.
JOB_UPDATE = [
    OpenApiExample(
        "Priority, timeout and attempts",
        value={"priority": "HIGH", "timeoutSec": 600, "retryPolicy": {"maxAttempts": 5}},
        request_only=True,
    )
]
ALERT_RULE_CREATE = [
    OpenApiExample(
        "Failing runs in a pool",
        value={
            "name": "payments failing",
            "kind": "FAILURE_RATE",
            "threshold": 20,
            "windowSec": 300,
            "pool": "default",
            "channels": [{"type": "email", "to": "oncall@example.com"}],
        },
        request_only=True,
    )
]
ALERT_RULE_UPDATE = [OpenApiExample("Disable a rule", value={"enabled": False}, request_only=True)]

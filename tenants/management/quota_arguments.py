"""The quota flags that create_tenant and update_tenant share."""

import argparse
from typing import Any

# flag → Tenant field. A limit given as "none" is cleared (no limit).
QUOTA_FLAGS = {
    "--weight": "weight",
    "--max-concurrent": "max_concurrent_executions",
    "--max-active-jobs": "max_active_jobs",
    "--submit-rate": "submit_rate_per_minute",
}
UNSET = object()


def _limit(value: str) -> int | None:
    if value.lower() in ("none", "unlimited"):
        return None
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number (or 'none' for no limit)") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not positive: give 1 or more, or 'none' for no limit")
    return number


def _weight(value: str) -> int:
    number = _limit(value)
    if number is None:
        raise argparse.ArgumentTypeError("a weight is a whole number of 1 or more; it cannot be 'none'")
    return number


def add_quota_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--weight", type=_weight, default=UNSET, help="share of contended pools relative to other tenants (1)"
    )
    parser.add_argument(
        "--max-concurrent", type=_limit, default=UNSET, help="most executions QUEUED or RUNNING at once, or 'none'"
    )
    parser.add_argument("--max-active-jobs", type=_limit, default=UNSET, help="most jobs not finished, or 'none'")
    parser.add_argument("--submit-rate", type=_limit, default=UNSET, help="most job submissions a minute, or 'none'")


def quota_changes(options: dict[str, Any]) -> dict[str, int | None]:
    """The Tenant fields the flags given set, with their values."""
    changes = {}
    for flag, field in QUOTA_FLAGS.items():
        value = options.get(flag.lstrip("-").replace("-", "_"), UNSET)
        if value is not UNSET:
            changes[field] = value
    return changes


def describe(tenant) -> str:
    def limit(value) -> str:
        return "none" if value is None else str(value)

    return (
        f"weight {tenant.weight}, max concurrent {limit(tenant.max_concurrent_executions)},"
        f" max active jobs {limit(tenant.max_active_jobs)}, submit rate {limit(tenant.submit_rate_per_minute)}/min"
    )

"""Formatting for the dashboard's templates: state badges, times in UTC and local, durations."""

import json
import zoneinfo
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.html import format_html

from readmodels.durations import duration, milliseconds
from readmodels.last_runs import last_run as read_last_run

register = template.Library()

_EXECUTION_TONE = {
    "BLOCKED": "neutral",
    "PENDING": "neutral",
    "QUEUED": "indigo",
    "RUNNING": "blue",
    "SUCCEEDED": "green",
    "FAILED": "amber",
    "TIMED_OUT": "amber",
    "FAILED_WORKER_LOST": "amber",
    "CANCELLED": "muted",
    "DEAD": "red",
    "DISCARDED": "muted",
}
# Shorter words where the full name would not fit a badge.
_LABELS = {"FAILED_WORKER_LOST": "WORKER LOST"}
# A run's state (readmodels.runs.run_state): FAILED means a step ended DEAD.
_RUN_TONE = {"RUNNING": "blue", "SUCCEEDED": "green", "FAILED": "red", "CANCELLED": "muted"}
_JOB_TONE = {"ACTIVE": "green", "PAUSED": "amber", "CANCELLED": "muted", "COMPLETED": "neutral"}
_OUTCOME_TONE = {"OK": "green", "REFUSED": "amber", "INVALID": "amber", "NOT_FOUND": "muted", "ERROR": "red"}


@register.simple_tag
def state_badge(state: str, execution_id: Any = None) -> str:
    """An execution state as a coloured badge; with an id, the live feed updates it in place."""
    state = str(state or "")
    label = _LABELS.get(state, state.replace("_", " "))
    if execution_id:
        return format_html(
            '<span class="badge tone-{}" data-state="{}" data-exec="{}" title="{}">{}</span>',
            _EXECUTION_TONE.get(state, "neutral"),
            state,
            execution_id,
            state,
            label,
        )
    return format_html(
        '<span class="badge tone-{}" data-state="{}" title="{}">{}</span>',
        _EXECUTION_TONE.get(state, "neutral"),
        state,
        state,
        label,
    )


@register.filter
def state_label(state: str) -> str:
    """An execution state as its badge writes it (WORKER LOST, TIMED OUT)."""
    state = str(state or "")
    return _LABELS.get(state, state.replace("_", " "))


@register.simple_tag
def run_badge(state: str) -> str:
    return format_html(
        '<span class="badge tone-{}" data-run-state="{}">{}</span>', _RUN_TONE.get(str(state), "neutral"), state, state
    )


# The last run's states that make a finished one-off read as failed rather than completed: an
# execution's (DEAD) or a run's (FAILED, readmodels.runs.run_state).
_FAILED_RUN = frozenset({"DEAD", "DISCARDED", "FAILED"})


@register.simple_tag
def job_badge(state: str, last_run_state: str = "") -> str:
    """A job's state; a COMPLETED one-off whose run failed reads FAILED, so a failure is not
    mistaken for a success."""
    if str(state) == "COMPLETED" and str(last_run_state or "") in _FAILED_RUN:
        return format_html(
            '<span class="badge tone-red" data-job-state="FAILED" title="{}">FAILED</span>',
            f"{state}: its last run failed",
        )
    return format_html(
        '<span class="badge tone-{}" data-job-state="{}">{}</span>', _JOB_TONE.get(str(state), "neutral"), state, state
    )


@register.filter
def last_run(job: Any) -> Any:
    """The job's last run (readmodels.last_runs): its state in run terms and when it moved."""
    return read_last_run(job)


@register.simple_tag
def outcome_badge(outcome: str) -> str:
    return format_html(
        '<span class="badge tone-{}">{}</span>', _OUTCOME_TONE.get(str(outcome), "neutral"), outcome.replace("_", " ")
    )


@register.filter
def utc(value: datetime | None) -> str:
    """2027-03-14 10:00:00Z: every time on the pages is UTC unless marked local."""
    if not value:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@register.filter
def utc_short(value: datetime | None) -> str:
    if not value:
        return "—"
    return value.astimezone(UTC).strftime("%m-%d %H:%M:%S")


@register.filter
def iso(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else ""


@register.filter
def in_zone(value: datetime | None, zone: str) -> str:
    """The time as a wall clock in `zone`, with its offset: 2027-03-14 03:00 -07:00 (PDT)."""
    if not value:
        return "—"
    try:
        local = value.astimezone(zoneinfo.ZoneInfo(zone or "UTC"))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return utc(value)
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S}{offset[:3]}:{offset[3:]} {local.tzname()}"


@register.filter
def ms(value: float | None) -> str:
    return "—" if value is None else milliseconds(value)


@register.filter(name="duration")
def duration_filter(seconds: float | None) -> str:
    """A number of seconds as people read it (readmodels/durations.py): 15 h 25 min."""
    return "—" if seconds is None else duration(seconds)


@register.simple_tag
def elapsed(start: datetime | None, end: datetime | None = None) -> str:
    if not start or not end:
        return "—"
    return ms((end - start).total_seconds() * 1000)


@register.filter
def pretty_json(value: Any) -> str:
    if value is None:
        return "—"
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def short_id(value: Any) -> str:
    return str(value)[:8]


@register.filter
def number(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


@register.simple_tag
def approx(count: int, exact: bool) -> str:
    """An exact count with separators, or an estimate marked with ≈ and rounded."""
    if exact:
        return f"{count:,}"
    if count >= 1_000_000:
        return f"≈{count / 1_000_000:.1f}M"
    return f"≈{count / 1000:.0f}k"


@register.filter
def get(mapping: dict, key: str) -> Any:
    return mapping.get(key) if mapping else None


@register.filter
def tone(state: str) -> str:
    """The colour family of an execution state (for dots and bars beside the badges)."""
    return _EXECUTION_TONE.get(str(state), "neutral")


@register.filter
def in_zone_short(value: datetime | None, zone: str) -> str:
    """The local wall time, short: `09:00:00 CET`, with the date only when it differs from the
    UTC date beside it (`11-23 01:00:00 AEDT`)."""
    if not value:
        return "—"
    try:
        local = value.astimezone(zoneinfo.ZoneInfo(zone or "UTC"))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return utc(value)
    when = f"{local:%H:%M:%S}" if local.date() == value.astimezone(UTC).date() else f"{local:%m-%d %H:%M:%S}"
    return f"{when} {local.tzname()}"

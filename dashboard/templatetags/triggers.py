"""What makes a job fire and what a fire runs, as the job's page and the jobs list say it: a cron
schedule in its timezone, an interval from its start, a one-off's time, a delay, or an event
job's `on invoice.paid where {currency: "EUR"}`; a handler in its pool, or a workflow's steps and
their pools. One wording for both pages, so an EVENT job never reads as "once at —"."""

import json
import re
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from dashboard.templatetags.dashboard import utc
from jobs.models import JobType
from readmodels.durations import duration, period

register = template.Library()

# A filter's key shown bare, as in `{currency: "EUR"}`; any other key is shown quoted, as JSON.
_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# The jobs list shows this much of a filter; the rest is on hover and on the job's page.
LIST_FILTER_CHARS = 60


def _debounce(job: Any) -> SafeString:
    """A debounced EVENT job's window (docs/events.md, "Debounce"): `, once quiet for 3s (at most 1m)`."""
    longest = format_html(" (at most {})", duration(job.debounce_max_sec)) if job.debounce_max_sec else ""
    return format_html(
        '<span class="muted" data-testid="job-debounce">, once quiet for {}{}</span>',
        duration(job.debounce_sec),
        longest,
    )


def filter_text(event_filter: dict[str, Any]) -> str:
    """An event filter as one line: its keys bare where they can be, its values as JSON (a string
    quoted: the filter's equality tells "1" from 1)."""
    parts = [
        f"{key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)}: "
        f"{json.dumps(value, ensure_ascii=False, separators=(', ', ': '))}"
        for key, value in event_filter.items()
    ]
    return "{" + ", ".join(parts) + "}"


@register.simple_tag
def job_trigger(job: Any, compact: bool = False) -> SafeString:
    """When the job fires. `compact`: the jobs list's cell, where a long filter is cut short."""
    if job.type == JobType.EVENT:
        if not job.event_filter:
            on = format_html('on <code class="mono trigger-code" data-testid="job-event">{}</code>', job.event_name)
        else:
            text = filter_text(job.event_filter)
            shown = text if not compact or len(text) <= LIST_FILTER_CHARS else text[: LIST_FILTER_CHARS - 1] + "…"
            on = format_html(
                'on <code class="mono trigger-code" data-testid="job-event">{}</code>'
                ' where <code class="mono" title="{}">{}</code>',
                job.event_name,
                text,
                shown,
            )
        return on + _debounce(job) if getattr(job, "debounce_sec", None) else on
    if job.type == JobType.CRON:
        return format_html(
            '<code class="mono trigger-code" title="{}">{}</code> <span class="muted">in {}</span>',
            job.schedule,
            job.schedule,
            job.timezone,
        )
    if job.type == JobType.INTERVAL:
        return format_html(
            'every <span class="trigger-code" data-testid="job-interval" title="{} s">{}</span>'
            ' <span class="muted">from</span> <span class="mono">{}</span>',
            job.every_sec,
            period(job.every_sec),
            utc(job.start_at),
        )
    if job.type == JobType.DELAYED:
        return format_html(
            'once, {} after creation: <span class="mono">{}</span>', duration(job.delay_sec), utc(job.run_at)
        )
    return format_html('once at <span class="mono">{}</span>', utc(job.run_at))


@register.simple_tag
def job_target(job: Any) -> SafeString:
    """What a fire runs: a handler in its pool, or a workflow's steps and the pools they run in."""
    steps = (job.workflow or {}).get("steps") or []
    if not steps:
        return format_html(
            '<span class="mono">{}</span> <span class="muted">in pool</span> <span class="mono">{}</span>',
            job.handler,
            job.pool,
        )
    pools = dict.fromkeys(step["target"]["pool"] for step in steps)
    return format_html(
        'workflow of {} step{} <span class="muted">in pool{}</span> {}',
        len(steps),
        "" if len(steps) == 1 else "s",
        "" if len(pools) == 1 else "s",
        format_html_join(", ", '<span class="mono">{}</span>', ((pool,) for pool in pools)),
    )

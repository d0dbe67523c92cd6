"""A job page's versions panel: the job's latest versions, and the one chosen with `?version=n`
(else the latest): what it changed, and what restoring it would change now."""

from typing import Any

from jobs.models import Job
from jobs.states import TERMINAL
from jobs.versions import changes_between, version_get, version_list

VERSIONS_SHOWN = 20


def versions_panel(*, job: Job, chosen_number: str) -> dict[str, Any]:
    """The panel's context; `chosen_number` is the `?version=` the page was asked for, as text."""
    shown = list(version_list(job=job)[: VERSIONS_SHOWN + 1])
    latest = shown[0] if shown else None
    chosen = latest
    if chosen_number.isdigit() and latest is not None and int(chosen_number) != latest.number:
        chosen = version_get(job=job, number=int(chosen_number)) or latest
    restore_changes = []
    if chosen is not None and latest is not None and chosen.number != latest.number:
        restore_changes = changes_between(latest.definition, chosen.definition)
    return {
        "versions": shown[:VERSIONS_SHOWN],
        "versions_more": len(shown) > VERSIONS_SHOWN,
        "version_chosen": chosen,
        "version_latest": latest,
        "restore_changes": restore_changes,
        "can_restore": bool(restore_changes) and job.state not in TERMINAL,
    }

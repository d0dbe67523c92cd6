"""A job page's versions panel: the job's latest versions, and the one chosen with `?version=n`
(else the latest): what it changed, and what restoring it would change now. Shown in the API's
names, as a client reads them (a version keeps the model's: jobs.versions)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.models import Job, JobVersion
from jobs.states import ENDED
from jobs.versions import changes_between, version_get, version_list
from web.api.job_api_names import api_changes, api_definition

VERSIONS_SHOWN = 20


@dataclass(frozen=True)
class ShownVersion:
    """A version as the panel shows it: its definition and changes in the API's names."""

    number: int
    actor: str
    created_at: datetime
    changes: list[dict[str, Any]]
    definition: dict[str, Any]

    @classmethod
    def of(cls, version: JobVersion) -> "ShownVersion":
        return cls(
            number=version.number,
            actor=version.actor,
            created_at=version.created_at,
            changes=api_changes(version.changes),
            definition=api_definition(version.definition),
        )


def versions_panel(*, job: Job, chosen_number: str) -> dict[str, Any]:
    """The panel's context; `chosen_number` is the `?version=` the page was asked for, as text."""
    shown = list(version_list(job=job)[: VERSIONS_SHOWN + 1])
    latest = shown[0] if shown else None
    chosen = latest
    if chosen_number.isdigit() and latest is not None and int(chosen_number) != latest.number:
        chosen = version_get(job=job, number=int(chosen_number)) or latest
    restore_changes: list[dict[str, Any]] = []
    if chosen is not None and latest is not None and chosen.number != latest.number:
        restore_changes = api_changes(changes_between(latest.definition, chosen.definition))
    return {
        "versions": [ShownVersion.of(version) for version in shown[:VERSIONS_SHOWN]],
        "versions_more": len(shown) > VERSIONS_SHOWN,
        "version_chosen": chosen and ShownVersion.of(chosen),
        "version_latest": latest and ShownVersion.of(latest),
        "restore_changes": restore_changes,
        "can_restore": bool(restore_changes) and job.standing not in ENDED,
    }

"""The dead letter by kind of failure: DEAD executions grouped by their error's fingerprint
(executions/fingerprints.py), and a group's executions in bounded batches for a retry or a
discard of the whole group.

Every read goes through the partial index execution_dead_letter (error_fingerprint,
finished_at DESC WHERE state = 'DEAD'): the grouping reads the DEAD rows only, never the
history, and a group's newest rows are a walk of its range. Scoped like every selector:
`scope` is tenant ids, or None for staff.
"""

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet, Subquery

from executions import transitions
from executions.fingerprints import exception_type, masked
from executions.models import Execution
from executions.selectors import execution_list
from executions.states import ExecutionState

S = ExecutionState

# Groups shown at most (the newest by last failure); the rest are counted.
GROUP_LIMIT = 200
# A group action works in batches of this many executions...
BATCH = 200
# ...for at most this long per request, then answers with what remains: a group of 50,000 is
# worked through by asking again ("N more"), never by one request that outlives its timeout.
ACTION_SECONDS = 2.0


@dataclass
class ErrorGroup:
    fingerprint: str
    count: int
    first_seen: datetime | None
    last_seen: datetime | None
    jobs: int
    pools: list[str]  # the first and last pool names (both when there are more than one)
    pool_count: int
    sample_id: Any = None
    sample_error: str = ""
    sample_job: str = ""

    @property
    def masked(self) -> str:
        return masked(self.sample_error) or "(no error recorded)"

    @property
    def exception_type(self) -> str:
        return exception_type(self.sample_error)

    @property
    def key(self) -> str:
        """How a URL names the group."""
        return path_key(self.fingerprint)


@dataclass
class DeadLetter:
    groups: list[ErrorGroup]
    total: int  # DEAD executions in scope
    more_groups: int = 0  # groups beyond GROUP_LIMIT, not listed


# A fingerprint in a path: as executions/fingerprints.py writes it, or "-" for the DEAD rows
# that recorded no error.
_PATH_KEY = re.compile(r"[0-9a-f]{16}|-")


def fingerprint_in_path(raw: str) -> str | None:
    """The fingerprint a URL names ("-": none), or None when it cannot be one."""
    if not _PATH_KEY.fullmatch(raw):
        return None
    return "" if raw == "-" else raw


def path_key(fingerprint: str) -> str:
    return fingerprint or "-"


def dead_executions(*, scope: list[int] | None) -> QuerySet[Execution]:
    return execution_list(scope=scope).filter(state=S.DEAD).order_by()


def dead_letter_groups(*, scope: list[int] | None, limit: int = GROUP_LIMIT) -> DeadLetter:
    """The DEAD executions in scope by fingerprint, newest failure first: count, first and last
    seen, jobs and pools affected, and the newest one's error as the sample. Two statements:
    the grouping (an index-only range of execution_dead_letter, plus the heap for scoped
    callers' tenant), and the samples (one index probe per group listed, in one statement)."""
    rows = list(
        dead_executions(scope=scope)
        .values("error_fingerprint")
        .annotate(
            n=Count("pk"),
            first=Min("finished_at"),
            last=Max("finished_at"),
            jobs=Count("job_id", distinct=True),
            pool_count=Count("pool", distinct=True),
            pool_min=Min("pool"),
            pool_max=Max("pool"),
        )
    )
    rows.sort(key=lambda r: (r["last"] is not None, r["last"]), reverse=True)
    listed = rows[:limit]
    groups = [
        ErrorGroup(
            fingerprint=row["error_fingerprint"],
            count=row["n"],
            first_seen=row["first"],
            last_seen=row["last"],
            jobs=row["jobs"],
            pools=sorted({row["pool_min"], row["pool_max"]}),
            pool_count=row["pool_count"],
        )
        for row in listed
    ]
    if groups:
        newest = [
            Q(pk=Subquery(group_executions(scope=scope, fingerprint=g.fingerprint).values("pk")[:1])) for g in groups
        ]
        samples = {
            row["error_fingerprint"]: row
            for row in execution_list(scope=scope)
            .filter(reduce(or_, newest))
            .values("pk", "error_fingerprint", "error", "job__name")
        }
        for group in groups:
            sample = samples.get(group.fingerprint)
            if sample is not None:
                group.sample_id, group.sample_error, group.sample_job = (
                    sample["pk"],
                    sample["error"],
                    sample["job__name"],
                )
    return DeadLetter(groups=groups, total=sum(r["n"] for r in rows), more_groups=max(len(rows) - limit, 0))


def group_executions(*, scope: list[int] | None, fingerprint: str) -> QuerySet[Execution]:
    """A group's DEAD executions, newest failure first: a walk of its execution_dead_letter range."""
    return dead_executions(scope=scope).filter(error_fingerprint=fingerprint).order_by("-finished_at", "-id")


def group_count(*, scope: list[int] | None, fingerprint: str) -> int:
    return group_executions(scope=scope, fingerprint=fingerprint).order_by().count()


@dataclass
class GroupAction:
    """What a group action did in one request: how many it moved, how many it could not (their
    state changed under it), and how many of the group are still DEAD."""

    done: int = 0
    refused: int = 0
    remaining: int = 0


def group_act(
    *,
    scope: list[int] | None,
    fingerprint: str,
    act: Callable[[list[Execution]], tuple[int, int]],
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> GroupAction:
    """Apply `act` to the group's DEAD executions in batches of BATCH, oldest first, until none is
    left or `seconds` have passed; `act` takes a batch and returns (moved, refused). A batch that
    moved nothing ends it: what it refused is still DEAD (a quota, say), and asking again at once
    would only be refused again."""
    outcome = GroupAction()
    deadline = clock() + (ACTION_SECONDS if seconds is None else seconds)
    while True:
        batch = list(
            group_executions(scope=scope, fingerprint=fingerprint)
            .select_related("job")
            .order_by("finished_at", "id")[:BATCH]
        )
        if not batch:
            break
        moved, refused = act(batch)
        outcome.done += moved
        outcome.refused += refused
        if not moved or clock() >= deadline:
            break
    outcome.remaining = group_count(scope=scope, fingerprint=fingerprint)
    return outcome


def executions_discard(*, executions: Sequence[Execution], now: datetime, reason: str) -> set[Any]:
    """DEAD → DISCARDED for those of `executions` still DEAD (one statement, in the caller's
    transaction when there is one). Returns the ids moved."""
    moved = transitions.discard_dead_many([e.pk for e in executions], now=now, reason=reason)
    return {m.id for m in moved}

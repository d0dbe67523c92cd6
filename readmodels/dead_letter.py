"""The dead letter by kind of failure: DEAD executions grouped by their error's fingerprint
(executions/fingerprints.py), and a retry or a discard of a whole group: one pass over the
executions in the group when it began, in bounded batches, each execution tried at most once.

Every read goes through the partial index execution_dead_letter (error_fingerprint,
finished_at DESC WHERE state = 'DEAD'): the grouping reads the DEAD rows only, never the
history, and a group's newest rows are a walk of its range. Scoped like every selector:
`scope` is tenant ids, or None for staff.
"""

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet, Subquery

from executions.fingerprints import exception_type, masked
from executions.models import Execution
from executions.states import ExecutionState
from readmodels.selectors import execution_list

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


# A position in a group, in the order a group action works through it: (finished_at, id). A DEAD
# execution's finished_at is when it became DEAD (by the database's clock), and never null.
Key = tuple[datetime, Any]


@dataclass(frozen=True)
class Pass:
    """A group action's pass over the executions that were in the group when it began: those up
    to `upto` (the group's newest then), of which those up to `after` have been tried. An
    execution re-driven by the pass that fails again comes back DEAD with a later finished_at, so
    past `upto`: the pass does not take it again, and a pass always ends. As a string (`token`)
    it is the cursor with which a client continues the pass in its next request."""

    upto: Key
    after: Key | None = None

    def token(self) -> str:
        assert self.after is not None  # a pass is continued only once it has tried some
        return ".".join(f"{_micros(at)}.{pk.hex}" for at, pk in (self.after, self.upto))

    @classmethod
    def of_token(cls, raw: str) -> "Pass":
        """The pass a cursor names; ValueError when it is no cursor. Any text of the cursor's form
        names a pass (one with `after` past `upto` has nothing ahead), so that the form is all
        the API's schema need say."""
        found = _TOKEN.fullmatch(raw)
        if found is None:
            raise ValueError("not a cursor of a group action's answer")
        after_at, after_id, upto_at, upto_id = found.groups()
        return cls(upto=(_at(upto_at), uuid.UUID(upto_id)), after=(_at(after_at), uuid.UUID(after_id)))

    def ahead(self) -> Q:
        """The executions of the pass not yet tried. The bare bounds on finished_at make it a
        range of execution_dead_letter; the rest orders ties by id."""
        upto_at, upto_id = self.upto
        ahead = Q(finished_at__lte=upto_at) & (Q(finished_at__lt=upto_at) | Q(pk__lte=upto_id))
        if self.after is not None:
            after_at, after_id = self.after
            ahead &= Q(finished_at__gte=after_at) & (Q(finished_at__gt=after_at) | Q(pk__gt=after_id))
        return ahead


# Microseconds since 1970 (17 digits reach the year 5138) and an id, twice: `after` and `upto`.
CURSOR_PATTERN = r"^([0-9]{1,17})\.([0-9a-f]{32})\.([0-9]{1,17})\.([0-9a-f]{32})$"
_TOKEN = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _key(finished_at: datetime | None, pk: Any) -> Key:
    assert finished_at is not None  # DEAD is entered with it (transitions.discard)
    return (finished_at, pk)


def _micros(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1)


def _at(micros: str) -> datetime:
    return _EPOCH + timedelta(microseconds=int(micros))


@dataclass
class GroupAction:
    """What a group action did in one request: how many it moved, how many it could not (their
    state changed under it, or a quota refused them), and how many of its pass it has not tried
    yet (still DEAD); `next` continues the pass while any remain."""

    done: int = 0
    refused: int = 0
    remaining: int = 0
    next: Pass | None = None


def group_act(
    *,
    scope: list[int] | None,
    fingerprint: str,
    act: Callable[[list[Execution]], tuple[int, int]],
    resume: Pass | None = None,
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> GroupAction:
    """Apply `act` to the group's DEAD executions of one pass, in batches of BATCH, oldest first,
    until the pass is done or `seconds` have passed; `act` takes a batch and returns (moved,
    refused). The pass is `resume` (a cursor from the last answer), or else a new one over the
    executions in the group now. Each execution is tried at most once per pass: one re-driven
    that fails again meanwhile is not re-driven again (its handler would run again, and a group
    that keeps failing would never be done), and one refused is not asked again. A batch that
    moved nothing ends the request: a quota that refused it would refuse the next one too."""
    group = group_executions(scope=scope, fingerprint=fingerprint)
    if resume is None:
        newest = group.values_list("finished_at", "pk").first()
        if newest is None:
            return GroupAction()
        resume = Pass(upto=_key(*newest))
    outcome = GroupAction()
    deadline = clock() + (ACTION_SECONDS if seconds is None else seconds)
    # Only a clock stepped back could bring one tried here into the range ahead again; this
    # request does not take it a second time even then.
    tried: set[Any] = set()
    while True:
        batch = list(group.filter(resume.ahead()).select_related("job").order_by("finished_at", "id")[:BATCH])
        if not batch:
            return outcome
        resume = Pass(upto=resume.upto, after=_key(batch[-1].finished_at, batch[-1].pk))
        moved, refused = act([e for e in batch if e.pk not in tried])
        tried.update(e.pk for e in batch)
        outcome.done += moved
        outcome.refused += refused
        if not moved or clock() >= deadline:
            break
    outcome.remaining = group.filter(resume.ahead()).order_by().count()
    outcome.next = resume if outcome.remaining else None
    return outcome

"""An execution's history: the events its own columns tell, and when they are written as rows.

Every move of an execution is an event of its history (the API's `events`, the dashboard's
timeline, the live feed). Most executions only ever take the happy path, ∅ → PENDING → QUEUED →
RUNNING → SUCCEEDED, and every field of those four events is a column of the execution already:

| event | at | from → to | attempt | worker | message |
| --- | --- | --- | --- | --- | --- |
| made | `created_at` | ∅ → PENDING | 1 | "" | by `origin` (`created_message`) |
| queued | `queued_at` | PENDING → QUEUED | `attempt` | "" | "" |
| started | `started_at` | QUEUED → RUNNING | `attempt` | `worker_id` | "started" |
| succeeded | `finished_at` | RUNNING → SUCCEEDED | `attempt` | `worker_id` | "succeeded" |

So those are not written as ExecutionEvent rows while the execution is on that path: its
`history_derived` is true, and its history is read from its columns (`derived_events`). The first
move off the path (a failure, a rescue, a cancel or a cancel request, a release, a publish again,
a success that could not store its result: anything but the three moves above) "materialises"
first: in the same statement (PostgreSQL) or transaction (SQLite) as that move, while the columns
still say what happened, the derived events so far are written as rows, `history_derived` becomes
false, and from then on every event is a row, as before. So:

- an execution whose `history_derived` is true has no event rows; one whose flag is false has
  all its events as rows. No history is ever half one and half the other, and a reader never
  merges or de-duplicates the two (the rows written before this existed, migrated with false,
  are read as they are);
- nothing the derived events read is overwritten while the flag is true: the happy moves set
  each column once (a derived execution is on its first attempt, never released, so its worker
  is "" when queued), and every other move materialises before it writes (a release clears
  `started_at`: the PostgreSQL statement reads the row as it was, locked, for that);
- a new execution is made with the flag true and no event, in PENDING; a workflow step made
  BLOCKED (∅ → BLOCKED, "waits for its upstream steps") is made with the flag false and its event.

A happy run thus writes no history row at all: four rows, their eight index entries and their
foreign-key row locks less per job (bench/README.md, "Cost per job"). Retries and the other
paths write what they wrote before, plus the happy events they follow (which they always had).

The store writes them (store/postgres/, store/sqlite/); executions/history.py reads them.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from store.tables import PENDING, QUEUED, RUNNING, SUCCEEDED

# The messages the derived events carry, as the moves wrote them before they were derived.
STARTED_MESSAGE = "started"
SUCCEEDED_MESSAGE = "succeeded"
ROOT_STEP_MESSAGE = "scheduled (a root step of its run)"
SCHEDULED_MESSAGE = "scheduled"
CREATED_BY: Mapping[str, str] = {"TRIGGER": "triggered", "EVENT": "started by an event"}

# The moves that keep the history derived: what their events say, the columns already say.
HAPPY_MOVES = frozenset({(PENDING, QUEUED), (QUEUED, RUNNING), (RUNNING, SUCCEEDED)})

# What `derived_events` reads of an execution.
DERIVED_FROM = ("created_at", "origin", "run_id", "attempt", "queued_at", "started_at", "finished_at", "worker_id")


class Event(NamedTuple):
    at: datetime
    from_state: str
    to_state: str
    attempt: int
    worker_id: str
    message: str


def created_message(*, origin: str, run_id: Any) -> str:
    """The first event's message of an execution made in PENDING."""
    if run_id is not None:
        return ROOT_STEP_MESSAGE
    return CREATED_BY.get(str(origin), SCHEDULED_MESSAGE)


def is_happy(source: str, target: str, message: str) -> bool:
    """Whether a move keeps the history derived: its event is what the columns will say."""
    if (source, target) not in HAPPY_MOVES:
        return False
    return message == {QUEUED: "", RUNNING: STARTED_MESSAGE, SUCCEEDED: SUCCEEDED_MESSAGE}[target]


def derived_events(row: Any, *, state: str) -> list[Event]:
    """The events an execution's columns tell (`row`: anything with DERIVED_FROM's attributes),
    oldest first, as the moves of the happy path wrote them, for an execution in `state` whose
    history is derived."""
    attempt, worker = row.attempt, row.worker_id or ""
    events = [Event(row.created_at, "", PENDING, 1, "", created_message(origin=row.origin, run_id=row.run_id))]
    if row.queued_at is not None and state in (QUEUED, RUNNING, SUCCEEDED):
        events.append(Event(row.queued_at, PENDING, QUEUED, attempt, "", ""))
    if row.started_at is not None and state in (RUNNING, SUCCEEDED):
        events.append(Event(row.started_at, QUEUED, RUNNING, attempt, worker, STARTED_MESSAGE))
    if row.finished_at is not None and state == SUCCEEDED:
        events.append(Event(row.finished_at, RUNNING, SUCCEEDED, attempt, worker, SUCCEEDED_MESSAGE))
    return events


def event_models(model: Any, execution_id: Any, row: Any, *, state: str) -> list[Any]:
    """`derived_events` of `row` as unsaved instances of `model` (ExecutionEvent): what the store
    writes when it materialises a history, and what its readers show of a derived one."""
    return [
        model(
            execution_id=execution_id,
            at=e.at,
            from_state=e.from_state,
            to_state=e.to_state,
            attempt=e.attempt,
            worker_id=e.worker_id,
            message=e.message,
        )
        for e in derived_events(row, state=state)
    ]


def as_row(values: Mapping[str, Any]) -> Any:
    """A mapping of DERIVED_FROM's columns as `derived_events` reads a row."""
    return _Row(**{name: values[name] for name in DERIVED_FROM})


class _Row(NamedTuple):
    created_at: datetime
    origin: str
    run_id: Any
    attempt: int
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    worker_id: str

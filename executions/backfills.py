"""A backfill's named transitions (executions/states.py, BACKFILL): each one conditional UPDATE;
False is an answer (it was not RUNNING: it finished or was cancelled first). The services that ask
for them are scheduling/backfills.py's."""

from datetime import datetime
from typing import Any

from executions.models import Backfill
from executions.states import BACKFILL, BackfillState


def _move(name: str, backfill_id: Any, now: datetime) -> bool:
    sources, target = BACKFILL.sources(name), BACKFILL.target(name)
    return Backfill.objects.filter(pk=backfill_id, state__in=sources).update(state=target, finished_at=now) == 1


@BACKFILL.transition([BackfillState.RUNNING], BackfillState.DONE)
def backfill_finish(*, backfill_id: Any, now: datetime) -> bool:
    """RUNNING → DONE: every fire released, every run it started ended."""
    return _move("backfill_finish", backfill_id, now)


@BACKFILL.transition([BackfillState.RUNNING], BackfillState.CANCELLED)
def backfill_cancel(*, backfill_id: Any, now: datetime) -> bool:
    """RUNNING → CANCELLED: nothing more is released."""
    return _move("backfill_cancel", backfill_id, now)

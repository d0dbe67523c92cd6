"""A message that carries several runs of one pool (background/publisher.py): its slot runs them
one after another, each exactly as a message of its own would have (`runner.run`: its own start
under its own lease token, heartbeats, timeout, cancel, log capture, trace, outcome).

A run of the batch that has not begun is still QUEUED under its token: nothing of it is in this
process but the message. So whatever happens to the slot, it is neither lost nor run twice:

- the runs that wait behind the slot's current one wait at most
  TICKWORK_BATCH_HAND_BACK_SECONDS (`HandBack`): past it, those not begun are published again,
  as one message at the front of their queue, for any slot to take, and this slot skips them;
- a worker that is shutting down hands back the runs it has not begun, at once;
- a process that dies leaves them QUEUED; the sweeper publishes them again after the publish
  grace, as for a lost message;
- a copy delivered twice (handed back, published again by the sweeper, delivered again by the
  broker) starts once: a start moves the row from QUEUED under that token, and the others find
  it moved and drop their delivery.
"""

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence

from django.conf import settings

from background.process_thread import ProcessThread
from background.publisher import CeleryPublisher, Dispatch
from worker import runner
from worker.heartbeats import shutting_down

logger = logging.getLogger(__name__)


class Batch:
    """The runs of one message that its slot has not begun."""

    def __init__(self, runs: Sequence[Sequence], *, pool: str, priority: int, hand_back_at: float) -> None:
        self.waiting = deque((str(execution_id), int(token)) for execution_id, token in runs)
        self.pool, self.priority = pool, priority
        self.hand_back_at = hand_back_at  # monotonic
        self.lock = threading.Lock()

    def take(self) -> tuple[str, int] | None:
        """The next run for the slot to begin, or None: none is left, or the rest was handed back."""
        with self.lock:
            return self.waiting.popleft() if self.waiting else None

    def hand_back(self, why: str, *, taken: tuple[str, int] | None = None) -> None:
        """Publish the runs not begun again (and `taken`, one the slot took but will not begin),
        at the front of their queue; the slot begins none of them. They are QUEUED under their
        tokens: should the publish fail, the sweeper publishes them again after the publish grace."""
        with self.lock:
            rest, self.waiting = ([taken] if taken else []) + list(self.waiting), deque()
        if not rest:
            return
        logger.info("handing back %d run(s) of a batch: %s", len(rest), why)
        try:
            _publisher().publish_messages(
                [[Dispatch(execution_id, token, self.pool, self.priority) for execution_id, token in rest]], front=True
            )
        except Exception:
            logger.exception("could not hand back %d run(s); they stay QUEUED until published again", len(rest))


class HandBack(ProcessThread):
    """The thread of a worker process that hands back the runs a batch still holds once they have
    waited TICKWORK_BATCH_HAND_BACK_SECONDS behind its slot's current run (a long run, a rate
    limit's wait). One thread for the process, woken once per batch: a timer per batch would
    start a thread per message."""

    def __init__(self) -> None:
        super().__init__(name="batch-hand-back")
        self.batches: set[Batch] = set()
        self.changed = threading.Condition()

    def add(self, batch: Batch) -> None:
        with self.changed:
            self.batches.add(batch)
            self.changed.notify()

    def remove(self, batch: Batch) -> None:
        with self.changed:
            self.batches.discard(batch)

    def run(self) -> None:
        while True:
            with self.changed:
                now = time.monotonic()
                due = [batch for batch in self.batches if batch.hand_back_at <= now]
                self.batches.difference_update(due)
                if not due:
                    earliest = min((batch.hand_back_at for batch in self.batches), default=None)
                    self.changed.wait(None if earliest is None else earliest - now)
                    continue
            for batch in due:  # outside the lock: a publish is a broker round trip
                batch.hand_back("they waited too long behind their slot's current run")


_publishers: dict[int, CeleryPublisher] = {}


def _publisher() -> CeleryPublisher:
    """One per process (its Redis client is kept); a hand-back is one message already."""
    publisher = _publishers.get(os.getpid())
    if publisher is None:
        publisher = _publishers[os.getpid()] = CeleryPublisher()
    return publisher


def run(runs: Sequence[Sequence], *, pool: str, priority: int) -> int:
    """Run a batch's runs in this slot, one after another. Returns how many it began."""
    batch = Batch(
        runs, pool=pool, priority=priority, hand_back_at=time.monotonic() + settings.TICKWORK_BATCH_HAND_BACK_SECONDS
    )
    hand_back = HandBack.of_process()
    hand_back.add(batch)
    begun = 0
    try:
        while (run := batch.take()) is not None:
            if shutting_down():
                # Not begun, and this worker starts nothing more: another worker takes them now.
                batch.hand_back("this worker is shutting down", taken=run)
                break
            begun += 1
            runner.run(execution_id=run[0], lease_token=run[1], defer_success=True)
    except BaseException:
        # The slot is going (an error outside any run's own handling, the process's exit):
        # what it has not begun goes to another slot now rather than after the publish grace.
        batch.hand_back("its slot stopped")
        raise
    finally:
        hand_back.remove(batch)
    return begun

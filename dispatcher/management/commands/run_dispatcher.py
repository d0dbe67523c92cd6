import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from background.loop import StopFlag, run_forever
from background.publisher import CeleryPublisher
from dispatcher.claim import next_due_at
from dispatcher.dispatcher import dispatch_once
from dispatcher.wakeup import DueClock, Listener
from executions.clock import db_now


class Command(BaseCommand):
    help = "Claim due executions and publish them to their pools' queues, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        stop, publisher, listener = StopFlag(), CeleryPublisher(), Listener()
        clock = DueClock(poll=settings.TICKWORK_POLL_SECONDS)
        batch, spacing = settings.TICKWORK_DISPATCH_BATCH, settings.TICKWORK_CLAIM_SPACING_SECONDS
        last = {"at": 0.0, "full": False}

        def step() -> float:
            if not last["full"]:
                # Woken by a create right after the last claim: let a few more come, so that a
                # stream of creates is claimed a few at a time rather than with a claim each.
                stop.event.wait(last["at"] + spacing - time.monotonic())
            close_old_connections()
            last["at"], now = time.monotonic(), db_now()
            result = dispatch_once(now=now, publisher=publisher, limit=batch)
            last["full"] = result.claimed >= batch
            if result.claimed:
                self.stdout.write(f"dispatched {result.published} (claimed {result.claimed}, skipped {result.skipped})")
            if last["full"]:
                return 0  # more is due right now
            clock.claimed(now)
            if result.materialised:
                clock.forget()
            if clock.stale(db_now()):
                clock.asked(next_due_at(after=now))
            while not stop.stopping:
                heard = listener.wait(clock.wait_seconds(db_now()), sleep=time.sleep)
                if heard is None:
                    return 0  # the due time (or the poll) came
                clock.heard(heard)
                if heard <= db_now():
                    return 0
            return 0

        try:
            run_forever(name="dispatcher", step=step, stop=stop)
        finally:
            listener.close()

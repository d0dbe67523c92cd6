import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections
from django.utils import timezone

from dispatch.claim import next_due_at
from dispatch.dispatcher import dispatch_once
from dispatch.loop import StopFlag, run_forever
from dispatch.publisher import CeleryPublisher
from dispatch.wakeup import Listener


class Command(BaseCommand):
    help = "Claim due executions and publish them to their pools' queues, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        stop, publisher, listener = StopFlag(), CeleryPublisher(), Listener()
        batch, poll = settings.TICKWORK_DISPATCH_BATCH, settings.TICKWORK_POLL_SECONDS

        def step() -> float:
            close_old_connections()
            result = dispatch_once(now=timezone.now(), publisher=publisher, limit=batch)
            if result.claimed:
                self.stdout.write(f"dispatched {result.published} (claimed {result.claimed}, skipped {result.skipped})")
            if result.claimed >= batch:
                return 0  # more is due right now
            due = next_due_at(now=timezone.now())
            wait = poll if due is None else min(poll, (due - timezone.now()).total_seconds())
            # Due but not claimed means another dispatcher holds those rows: look again shortly.
            listener.wait(max(wait, 0.005 if result.claimed == 0 else 0), sleep=time.sleep)
            return 0

        try:
            run_forever(name="dispatcher", step=step, stop=stop)
        finally:
            listener.close()

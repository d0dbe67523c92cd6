from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from background.loop import StopFlag, run_forever
from background.publisher import CeleryPublisher
from executions.clock import db_now
from maintenance.sweeper import sweep_once


class Command(BaseCommand):
    help = "Reclaim lost, stalled and overdue executions and prune history, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        stop, publisher = StopFlag(), CeleryPublisher()

        def step() -> float:
            close_old_connections()
            result = sweep_once(now=db_now(), publisher=publisher)
            return 0 if result.total() >= 500 else settings.TICKWORK_SWEEP_SECONDS

        run_forever(name="sweeper", step=step, stop=stop)

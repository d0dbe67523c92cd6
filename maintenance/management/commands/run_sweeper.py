from django.core.management.base import BaseCommand

from background.loop import StopFlag
from background.publisher import CeleryPublisher
from maintenance.sweeper import serve
from telemetry import tracing


class Command(BaseCommand):
    help = "Reclaim lost, stalled and overdue executions and prune history, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        tracing.setup("sweeper")
        serve(stop=StopFlag(), publisher=CeleryPublisher())

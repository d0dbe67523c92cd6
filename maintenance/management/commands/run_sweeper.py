from django.core.management.base import BaseCommand

from background.loop import StopFlag
from background.publisher import CeleryPublisher
from maintenance import registry, roles


class Command(BaseCommand):
    help = "Reclaim lost, stalled and overdue executions and prune history, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        roles.serve(registry.SWEEPER, stop=StopFlag(), publisher=CeleryPublisher())

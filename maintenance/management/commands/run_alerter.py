from django.core.management.base import BaseCommand

from background.loop import StopFlag
from background.publisher import CeleryPublisher
from maintenance import registry, roles


class Command(BaseCommand):
    help = "Evaluate alert rules and send their notifications, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        roles.serve(registry.ALERTER, stop=StopFlag(), publisher=CeleryPublisher())

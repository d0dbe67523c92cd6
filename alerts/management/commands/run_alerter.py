from django.core.management.base import BaseCommand

from alerts.alerter import serve
from background.loop import StopFlag


class Command(BaseCommand):
    help = "Evaluate alert rules and send their notifications, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        serve(stop=StopFlag())

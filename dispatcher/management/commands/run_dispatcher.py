from background.command import RoleCommand
from background.loop import StopFlag
from background.publisher import CeleryPublisher, LiveSlots
from dispatcher.dispatcher import serve
from telemetry import tracing


class Command(RoleCommand):
    help = "Claim due executions and publish them to their pools' queues, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        tracing.setup("dispatcher")
        serve(stop=StopFlag(), publisher=CeleryPublisher(slots=LiveSlots()))

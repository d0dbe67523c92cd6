from background.command import RoleCommand
from background.loop import StopFlag
from background.publisher import CeleryPublisher
from maintenance import registry, roles


class Command(RoleCommand):
    help = "Evaluate alert rules and send their notifications, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        roles.serve(registry.ALERTER, stop=StopFlag(), publisher=CeleryPublisher())

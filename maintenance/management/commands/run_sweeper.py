from background.command import RoleCommand
from background.loop import StopFlag
from background.publisher import CeleryPublisher
from maintenance import registry, roles


class Command(RoleCommand):
    help = "Reclaim lost, stalled and overdue executions and prune history, until SIGINT/SIGTERM."

    def handle(self, *args, **options) -> None:
        roles.serve(registry.SWEEPER, stop=StopFlag(), publisher=CeleryPublisher())

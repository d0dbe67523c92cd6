"""The recipe of docs/architecture.md, "A background service": a service added to a role's entry
in the registry is run by that role's command and loop, every pass, and the standalone supervisor
starts that role, with no other edit."""

import dataclasses
import threading
from datetime import datetime

import pytest
from django.core.management import call_command

from background.loop import StopFlag
from background.service import Counts, Needs
from maintenance import registry
from standalone.supervisor import role_commands

# The loop closes the connection between passes, as a role's process does: no test transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@dataclasses.dataclass
class Waved(Counts):
    waves: int = 0


class OnePass(StopFlag):
    """Stops the loop after its first pass (after its third try, should a pass fail), without
    taking the process's signals."""

    def __init__(self) -> None:
        self.event, self.asked = threading.Event(), 0

    @property
    def stopping(self) -> bool:
        self.asked += 1
        return self.event.is_set() or self.asked > 3


def _added(monkeypatch, role: registry.ServiceRole, runs: list[datetime], stop: OnePass) -> None:
    class Wave:
        name = "wave"

        @classmethod
        def build(cls, needs: Needs) -> "Wave":
            return cls()

        def run_once(self, *, now: datetime) -> Waved:
            runs.append(now)
            stop.event.set()
            return Waved(waves=1)

    grown = dataclasses.replace(role, services=(*role.services, Wave))
    monkeypatch.setattr(registry, role.kind.upper(), grown)
    monkeypatch.setattr(registry, "ROLES", tuple(grown if r is role else r for r in registry.ROLES))


@pytest.mark.parametrize("role", registry.ROLES, ids=lambda role: role.kind)
def test_a_service_added_to_a_role_is_run_by_its_command_every_pass(monkeypatch, role, caplog):
    runs: list[datetime] = []
    stop = OnePass()
    _added(monkeypatch, role, runs, stop)
    monkeypatch.setattr(f"maintenance.management.commands.{role.command}.StopFlag", lambda: stop)

    with caplog.at_level("INFO", logger="background.loop"):
        call_command(role.command)

    assert len(runs) == 1
    assert f"{role.log_as}: " in caplog.text and "wave(waves=1)" in caplog.text


def test_the_standalone_supervisor_starts_one_process_per_role_of_the_registry():
    children = {child.name: child.argv for child in role_commands(host="h", port=1, pools=["p"], concurrency=1)}

    for role in registry.ROLES:
        assert children[role.kind][-1] == role.command
    assert list(children) == ["web", "dispatcher", "sweeper", "alerter", "worker"]

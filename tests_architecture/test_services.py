"""Every background service is in the one registry (maintenance/registry.py), which is what the
roles' loops, their commands and the standalone supervisor start from: a module in
maintenance/services/ that the registry does not list would never run."""

from pathlib import Path

from django.core.management import get_commands

from maintenance import registry
from pools.models import Role

SERVICES = Path(__file__).resolve().parents[1] / "maintenance" / "services"


def test_every_module_in_the_services_folder_is_a_service_of_one_role_named_as_its_module():
    modules = {path.stem for path in SERVICES.glob("*.py") if path.stem != "__init__"}
    listed = [service for role in registry.ROLES for service in role.services]

    assert sorted(service.__module__.rsplit(".", 1)[1] for service in listed) == sorted(modules)
    assert all(service.name == service.__module__.rsplit(".", 1)[1] for service in listed)


def test_each_role_of_the_registry_has_its_command_its_registry_row_and_its_setting(settings):
    commands = get_commands()
    for role in registry.ROLES:
        assert commands.get(role.command) == "maintenance", role.command
        assert role.kind in Role.Kind.values
        assert isinstance(getattr(settings, role.interval_setting), int | float)

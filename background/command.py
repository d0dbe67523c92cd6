"""The management command a long-running role is started by (`manage.py run_dispatcher`, …)."""

from django.core.management.base import BaseCommand


class RoleCommand(BaseCommand):
    """A role's command skips Django's system checks at start, as gunicorn and daphne do for the
    web role: they import the URLconf and every view to check them (0.15 to 0.2 CPU-s, a sixth of a
    role's start), and a supervisor, a rolling deploy or a test starts roles often. `make lint`
    (`manage.py check`) and `run_standalone`, a newcomer's one command, still run them."""

    requires_system_checks: list[str] = []

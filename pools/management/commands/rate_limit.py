from django.core.management.base import BaseCommand, CommandError

from jobs import registry
from pools import rate_limits
from pools.models import RateLimit


class Command(BaseCommand):
    help = (
        'Named rate limits (README, "Rate limits"): at most R starts a second, B at once, of the runs of the '
        "handlers that declare one and the jobs whose target names one, across every dispatcher and worker."
    )

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{set,list,delete}")
        define = actions.add_parser("set", help="define a limit, or change its rate and burst")
        define.add_argument("name", help="the limit's name: letters, digits and . _ - (e.g. payments)")
        define.add_argument("--per-second", type=float, required=True, help="starts a second (e.g. 10, or 0.5)")
        define.add_argument("--burst", type=int, default=1, help="starts at once after a quiet spell (default 1)")
        actions.add_parser("list", help="the limits, and the handlers that declare each")
        remove = actions.add_parser("delete", help="remove a limit: what names it then runs unlimited")
        remove.add_argument("name", help="the limit to remove")

    def handle(self, *args, action: str, **options) -> None:
        if action == "set":
            try:
                limit, created = rate_limits.define(
                    name=options["name"], per_second=options["per_second"], burst=options["burst"]
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{'defined' if created else 'changed'} rate limit {limit}")
        elif action == "delete":
            if not rate_limits.remove(name=options["name"]):
                raise CommandError(f"no rate limit '{options['name']}'")
            self.stdout.write(f"deleted rate limit {options['name']}")
        else:
            declared: dict[str, list[str]] = {}
            for name in registry.handler_names():
                spec = registry.get(name)
                if spec is not None and spec.rate_limit:
                    declared.setdefault(spec.rate_limit, []).append(name)
            limits = list(RateLimit.objects.order_by("name"))
            if not limits:
                self.stdout.write("no rate limits (define one: manage.py rate_limit set NAME --per-second R)")
            for limit in limits:
                handlers = ", ".join(declared.pop(limit.name, [])) or "none"
                self.stdout.write(f"{limit}; handlers: {handlers}")
            for name, names in sorted(declared.items()):
                self.stdout.write(f"{name}: NOT DEFINED (runs unlimited); handlers: {', '.join(names)}")

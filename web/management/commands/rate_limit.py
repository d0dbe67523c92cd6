from django.core.management.base import BaseCommand, CommandError
from django.http import Http404
from rest_framework.exceptions import ValidationError

from audit.services import Target, audited, cli_actor
from executions.clock import db_now
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
        # Audited as the jobs command's actions are: the operating system's user, actor kind cli.
        target = Target(type="rate_limit", id=options.get("name") or "", label=options.get("name") or "")
        if action == "set":

            def define() -> tuple[RateLimit, bool]:
                try:
                    return rate_limits.define(
                        name=options["name"], per_second=options["per_second"], burst=options["burst"]
                    )
                except ValueError as exc:
                    raise ValidationError(str(exc)) from exc  # recorded as INVALID

            try:
                limit, created = audited(
                    actor=cli_actor(),
                    action="rate_limit.set",
                    target=target,
                    now=db_now(),
                    run=define,
                    describe=lambda result: str(result[0]),
                )
            except ValidationError as exc:
                raise CommandError(exc.detail[0]) from exc  # type: ignore[index]  # a list, as raised above
            self.stdout.write(f"{'defined' if created else 'changed'} rate limit {limit}")
        elif action == "delete":

            def remove() -> None:
                if not rate_limits.remove(name=options["name"]):
                    raise Http404(f"no rate limit '{options['name']}'")  # recorded as NOT_FOUND

            try:
                audited(actor=cli_actor(), action="rate_limit.delete", target=target, now=db_now(), run=remove)
            except Http404 as exc:
                raise CommandError(str(exc)) from exc
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

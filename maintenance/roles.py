"""Running a role of the registry (registry.py): its services built once for the process, then
one pass of all of them (`run_once`, which tests call with their own `now`) or passes until
stopped (`serve`, which its management command calls)."""

from django.conf import settings

from background.loop import StopFlag, serve_services
from background.publisher import Publisher
from background.service import Needs, Pass, Service, run_pass
from executions.clock import db_now
from maintenance.registry import ServiceRole
from pools.roles import RoleBeat
from telemetry import tracing


def build(role: ServiceRole, *, publisher: Publisher) -> list[Service]:
    needs = Needs(publisher=publisher)
    return [service.build(needs) for service in role.services]


def run_once(role: ServiceRole, *, now, publisher: Publisher) -> Pass:
    """One pass of every service of `role` at `now`."""
    return run_pass(build(role, publisher=publisher), now=now)


def serve(role: ServiceRole, *, stop: StopFlag, publisher: Publisher) -> None:
    """Passes until `stop`, at the database's time, the role's row in the roles' registry beating."""
    if role.traced:
        tracing.setup(role.kind)
    serve_services(
        name=role.kind,
        services=build(role, publisher=publisher),
        stop=stop,
        clock=db_now,
        interval=getattr(settings, role.interval_setting),
        again_at=role.again_at,
        log_as=role.log_as,
        beat=RoleBeat(role.kind, clock=db_now),
    )

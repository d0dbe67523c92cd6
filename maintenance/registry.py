"""The one list of background services, and the roles that run them (River's maintenance
services, started from one list). Everything that starts a service reads it: each role's command
(`run_sweeper`, `run_alerter`, through roles.serve and background.loop.serve_services), the
standalone supervisor (one process per role here), and the roles' registry rows (`kind`).

A service added to a role's tuple is run by that role's loop, every pass, in the tuple's order,
with no other edit (docs/architecture.md, "A background service")."""

from dataclasses import dataclass

from background.service import Service
from maintenance.services import BATCH
from maintenance.services.alert_delivery import AlertDelivery
from maintenance.services.alert_evaluation import AlertEvaluation
from maintenance.services.backfills import Backfills
from maintenance.services.forced_cancels import ForcedCancels
from maintenance.services.history_partitions import HistoryPartitions
from maintenance.services.lost_leases import LostLeases
from maintenance.services.pool_history import PoolHistory
from maintenance.services.republishing import Republishing
from maintenance.services.retention import Retention
from maintenance.services.timeouts import Timeouts
from pools.models import Role


@dataclass(frozen=True)
class ServiceRole:
    kind: str  # its processes' rows in the roles' registry (pools.Role.Kind), and its name
    command: str  # the management command that runs it
    services: tuple[type[Service], ...]
    interval_setting: str  # the setting of the seconds between passes
    # A pass whose work reaches this runs again at once (there is more); None: every interval.
    again_at: int | None
    log_as: str  # a pass's log line: "<log_as>: <service>(<count>=n, …) …"
    traced: bool  # whether its spans are exported (telemetry.tracing.ROLES) when OTEL_* ask


# Take back what crashed, stalled or overstayed; forget what is past its retention; record each
# pool's minute. Any number may run (SKIP LOCKED, unique minute rows).
SWEEPER = ServiceRole(
    kind=Role.Kind.SWEEPER.value,
    command="run_sweeper",
    # In this order: the history's partitions of today and the days ahead are there before
    # anything writes an event; what is taken back is settled before anything is pruned, and
    # before a backfill counts its unfinished runs.
    services=(HistoryPartitions, LostLeases, Timeouts, ForcedCancels, Republishing, Backfills, Retention, PoolHistory),
    interval_setting="TICKWORK_SWEEP_SECONDS",
    again_at=BATCH,
    log_as="sweep",
    traced=True,
)

# A process of its own, not a step of the sweeper or the dispatcher: it must report them down
# (SCHEDULER_DOWN, and the dead man's switch MISSED_FIRE, which is exactly "the dispatcher is not
# firing"), which a step of theirs could not do once they stop; and a slow webhook or SMTP server
# must never delay a reclaim or a claim. Any number may run (a standby on a second host): alerts
# fire and resolve once and notifications are claimed. If every alerter is down, nothing pages:
# run one beside each dispatcher, or watch /v1/health from outside too.
ALERTER = ServiceRole(
    kind=Role.Kind.ALERTER.value,
    command="run_alerter",
    # Evaluation first: what fires in a pass is sent in the same pass.
    services=(AlertEvaluation, AlertDelivery),
    interval_setting="TICKWORK_ALERTS_INTERVAL_SECONDS",
    again_at=None,
    log_as="alerter",
    traced=False,
)

ROLES: tuple[ServiceRole, ...] = (SWEEPER, ALERTER)


def role(kind: str) -> ServiceRole:
    (found,) = [r for r in ROLES if r.kind == kind]
    return found

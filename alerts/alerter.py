"""The alerter: evaluates every alert rule every TICKWORK_ALERTS_INTERVAL_SECONDS, then sends what
that fired or resolved (and what earlier sends left to retry), and forgets old resolved alerts.

A process of its own (`manage.py run_alerter`), not a step of the sweeper or the dispatcher: it
must report them down (SCHEDULER_DOWN, and the dead man's switch MISSED_FIRE, which is exactly
"the dispatcher is not firing"), which a step of theirs could not do once they stop; and a slow
webhook or SMTP server must never delay a reclaim or a claim. Any number may run (a standby on a
second host): alerts fire and resolve once and notifications are claimed (alerts/services.py,
alerts/delivery.py). If every alerter is down, nothing pages: run one beside each dispatcher, or
watch /v1/health from outside too.

`run_once` is one unit of work and returns counts; `serve` is the loop the command runs.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections

from alerts.delivery import DeliveryResult, deliver_due
from alerts.services import EvaluationResult, alerts_prune, evaluate_all
from background.loop import StopFlag, run_forever
from executions.clock import db_now

logger = logging.getLogger(__name__)
PRUNE_BATCH = 500


@dataclass
class AlerterResult:
    evaluation: EvaluationResult
    delivery: DeliveryResult
    pruned: int

    def changed(self) -> bool:
        e = self.evaluation
        return bool(e.fired or e.resolved or e.failed or self.delivery.total() or self.pruned)


def run_once(*, now: datetime) -> AlerterResult:
    evaluation = evaluate_all(now=now)
    delivery = deliver_due(now=now, clock=db_now)
    pruned = alerts_prune(before=now - timedelta(days=settings.TICKWORK_RETENTION_DAYS), limit=PRUNE_BATCH)
    result = AlerterResult(evaluation, delivery, pruned)
    if result.changed():
        logger.info("alerter: %s", result)
    return result


def serve(*, stop: StopFlag) -> None:
    """Evaluate and deliver until `stop`, every TICKWORK_ALERTS_INTERVAL_SECONDS."""

    def step() -> float:
        close_old_connections()
        run_once(now=db_now())
        return settings.TICKWORK_ALERTS_INTERVAL_SECONDS

    run_forever(name="alerter", step=step, stop=stop)

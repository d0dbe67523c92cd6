"""Alert evaluation: judge every alert rule (alerts.services.evaluate_all): fire an alert for each
new breaching subject, resolve each firing one whose subject no longer breaches, with their
notifications in the same transaction. Once per (rule, subject) breach, however many alerters
run. One rule's failure is logged and counted, and the others are judged."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from alerts.services import evaluate_all
from background.service import Counts, Needs


@dataclass
class Judged(Counts):
    fired: int = 0
    resolved: int = 0
    failed: int = 0  # rules whose evaluation raised


class AlertEvaluation:
    name = "alert_evaluation"

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls()

    def run_once(self, *, now: datetime) -> Judged:
        result = evaluate_all(now=now)
        return Judged(fired=result.fired, resolved=result.resolved, failed=result.failed)

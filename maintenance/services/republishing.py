"""Republish: QUEUED and not started within the publish grace (its message was lost with a broker
or a worker that took it) → published again after commit; the grace doubles with each copy, so a
pool that is merely backlogged is not flooded (a duplicate is dropped by its lease token)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Self

from django.conf import settings
from django.db import transaction

from background.publisher import Dispatch, Publisher
from background.service import Counts, Needs
from executions import transitions
from maintenance.services import BATCH


@dataclass
class Republished(Counts):
    republished: int = 0


class Republishing:
    name = "republishing"

    def __init__(self, *, publisher: Publisher, publish_grace: float, batch: int = BATCH) -> None:
        self.publisher, self.publish_grace, self.batch = publisher, publish_grace, batch

    @classmethod
    def build(cls, needs: Needs) -> Self:
        return cls(publisher=needs.publisher, publish_grace=settings.TICKWORK_PUBLISH_GRACE_SECONDS)

    def run_once(self, *, now: datetime) -> Republished:
        with transaction.atomic():
            stalled = transitions.republish_many(now=now, grace_seconds=self.publish_grace, limit=self.batch)
            if stalled:
                dispatches = [
                    Dispatch(execution_id=str(e.id), lease_token=e.lease_token, pool=e.pool, priority=e.priority)
                    for e in stalled
                ]
                transaction.on_commit(lambda: self.publisher.publish(dispatches))
        return Republished(republished=len(stalled))

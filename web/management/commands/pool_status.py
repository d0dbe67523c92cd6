import json

from django.core.management.base import BaseCommand

from executions.clock import db_now
from readmodels.selectors import pool_overviews
from scheduling.pool_pauses import paused_pools
from web.api.pools import pool_as_json


class Command(BaseCommand):
    help = "Print GET /v1/pools as staff see it (every tenant's work), as JSON: for an autoscaler."

    def handle(self, *args, **options) -> None:
        now = db_now()
        paused = paused_pools()
        results = [pool_as_json(p, now, paused.get(p.pool)) for p in pool_overviews(scope=None, now=now)]
        self.stdout.write(json.dumps({"results": results, "next": None}))

"""The cron stage: what a schedule's fire costs the dispatcher, against a one-off's and against
django-celery-beat's.

- A minute's fires: `schedules` jobs `H * * * *`, each firing once an hour at a minute hashed
  from its id (spread over the hour); the fires of one minute (about a sixtieth of them) are dispatched with
  `dispatcher.run_once` and the real CeleryPublisher, each making its job's next fire. Baseline:
  django-celery-beat's DatabaseScheduler with as many crontabs finding and sending the same
  minute's tasks (bench/beat.py, in a process of its own).
- The midnight herd: `count` jobs `0 0 * * *` across `tenants` tenants, all due at the same
  midnight, dispatched until every fire is on the broker and every next fire made: fires per
  second, against the same number of one-off executions due at once. The order in which the herd
  is admitted must be fair: every tenant's first fire before any tenant's fifth.

No worker runs: a worker registered with FLEET_SLOTS slots stands in (Database.capacity), and between
two claims (untimed) what was admitted is taken off the broker and marked done, as a fleet of
that size would; so what is measured is the dispatcher and PostgreSQL."""

import json
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.config import FLEET_SLOTS, QUEUE, ROOT, log
from bench.results import Figure, median
from jobs import cron

SPREAD = "H * * * *"  # once an hour, at a minute of the job's own

# Cron jobs and their first fires, in one statement: `schedules[i]` for the i-th job, first fire
# `fires[i]`, tenant `tenants[i]`; the executions as executions.transitions.create makes them (their
# history derived: no event row, store/history.py).
_CRON_JOBS_SQL = """
WITH v AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(tenants)s::bigint[], %(schedules)s::varchar[], %(fires)s::timestamptz[])
        AS v(id, tenant_id, schedule, fire)
), j AS (
    INSERT INTO jobs_job (id, tenant_id, name, type, run_at, schedule, timezone, pool, handler, payload,
        max_attempts, backoff, initial_delay_ms, max_delay_ms, jitter, timeout_sec, priority, misfire_policy,
        concurrency_policy, state, next_fire_at, request_fingerprint, event_name, created_at, updated_at)
    SELECT v.id, v.tenant_id, 'bench cron', t.type, CASE WHEN t.type = 'CRON' THEN NULL ELSE v.fire END,
        CASE WHEN t.type = 'CRON' THEN v.schedule ELSE '' END, 'UTC', 'default', 'noop', '{}',
        3, 'EXPONENTIAL', 1000, 60000, true, 3600, 1, 'RUN_ONCE', 'ALLOW', 'ACTIVE', v.fire, '', '', %(now)s, %(now)s
    FROM v CROSS JOIN (SELECT %(type)s::varchar AS type) AS t
    RETURNING id, tenant_id, next_fire_at
), e AS (
    INSERT INTO executions_execution (id, job_id, tenant_id, pool, priority, origin, attempt, state, scheduled_for,
        available_at, lease_token, publish_count, worker_id, error, traceback, step, created_at, updated_at,
        history_derived)
    SELECT gen_random_uuid(), j.id, j.tenant_id, 'default', 1, 'SCHEDULE', 1, 'PENDING', j.next_fire_at,
        j.next_fire_at, 0, 0, '', '', '', '', %(now)s, %(now)s, true
    FROM j
    RETURNING id
)
SELECT count(*) FROM e"""


class Cron:
    def __init__(self, bench) -> None:
        self.bench, self.db, self.cfg = bench, bench.db, bench.cfg

    def run(self) -> None:
        self.bench.warm_dispatcher()
        self.minute()
        for count, tenants in ((self.cfg.cron_herd // 10, 1), (self.cfg.cron_herd, self.cfg.herd_tenants)):
            self.herd(count, tenants)
        # The herds leave 600,000 rows retired at once (bookkeeping, with their due times in the
        # past): until autovacuum reaches them, every probe of the due indexes that later stages
        # make walks their dead entries first (the lag stage's p50 went from 13 ms to 1.4 s).
        self.db.vacuum()

    # -- the figures

    def minute(self) -> None:
        count = self.cfg.cron_schedules
        # In the past, as the herd's midnight: the worker that stands in is live at that `now`,
        # and the fill's future executions are not due.
        top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
        log(f"cron: a minute's fires among {count:,} schedules H * * * *, against django-celery-beat")
        ours, theirs = [], []
        for r in range(self.cfg.rounds):
            tenant = self.db.tenant(f"bench-minute-{r}")
            # Each job's minute hashed from its id, as jobs.cron resolves it: spread over the hour.
            ids = [uuid.uuid4() for _ in range(count)]
            fires = [cron.next_fire(SPREAD, "UTC", top - timedelta(seconds=1), seed=str(i)) for i in ids]
            self.insert("CRON", [tenant] * count, [SPREAD] * count, fires, ids=ids)
            self.db.vacuum()
            due = sum(1 for f in fires if f == top)
            seconds, claimed = self.dispatch(now=top + timedelta(seconds=1), expect=due)
            ours.append(seconds * 1000)
            theirs.append(self.beat_minute(count))
            log(f"  round {r + 1}: {claimed} fires in {ours[-1]:.1f} ms; django-celery-beat {theirs[-1]:,.0f} ms")
            self.retire(tenant)
        value, base = median(ours), median(theirs)
        self.bench.figures.append(
            Figure(
                f"a minute's fires at {count:,} schedules",
                "ms",
                value,
                base,
                f"django-celery-beat, {count:,} crontabs",
                "≥ 100x faster",
                value * 100 <= base,
                {"ours": ours, "baseline": theirs},
            )
        )

    def herd(self, count: int, tenants: int) -> None:
        log(f"cron: the midnight herd, {count:,} jobs 0 0 * * * across {tenants} tenant(s), against one-offs")
        midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
        ours, theirs, fair = [], [], []
        for r in range(self.cfg.rounds):
            rates = {}
            for kind in ("CRON", "ONCE"):
                ids = [self.db.tenant(f"bench-herd-{kind}-{count}-{r}-{t}") for t in range(tenants)]
                per = [ids[i % tenants] for i in range(count)]
                self.insert(kind, per, ["0 0 * * *"] * count, [midnight] * count)
                self.db.vacuum()
                what = "cron fires (claim, publish, next fire)" if kind == "CRON" else "one-offs (claim, publish)"
                with self.bench.cost.measure(f"midnight herd of {count:,}, {tenants} tenant(s): {what}", jobs=count):
                    seconds, claimed = self.dispatch(now=midnight + timedelta(seconds=1), expect=count)
                rates[kind] = claimed / seconds
                if kind == "CRON":
                    fair.append(self.first_before_fifth(ids))
                    made = self.db.scalar(
                        "SELECT count(*) FROM executions_execution WHERE tenant_id = ANY(%s) AND state = 'PENDING'"
                        " AND scheduled_for = %s",
                        [ids, midnight + timedelta(days=1)],
                    )
                    if made != count:
                        raise RuntimeError(f"the herd made {made} next fires of {count}")
                for tenant in ids:
                    self.retire(tenant)
            ours.append(rates["CRON"])
            theirs.append(rates["ONCE"])
            log(f"  round {r + 1}: cron {ours[-1]:,.0f} fires/s, one-off {theirs[-1]:,.0f}/s; fair: {fair[-1]}")
        value, base = median(ours), median(theirs)
        self.bench.figures.append(
            Figure(
                f"midnight herd, {count:,} cron fires across {tenants} tenant(s)",
                "/s",
                value,
                base,
                "as many one-offs due at once",
                "≥ 5,000/s",
                value >= 5000,
                {"ours": ours, "baseline": theirs},
            )
        )
        if tenants > 1:
            self.bench.figures.append(
                Figure(
                    f"midnight herd, {count:,} cron fires: every tenant's first admitted before any fifth",
                    " rounds",
                    sum(fair),
                    len(fair),
                    "rounds run",
                    "all rounds",
                    all(fair),
                )
            )

    # -- helpers

    def insert(
        self, kind: str, tenants: list[int], schedules: list[str], fires: list[datetime], ids: list | None = None
    ) -> None:
        now = datetime.now(UTC)
        ids = ids or [uuid.uuid4() for _ in tenants]
        for start in range(0, len(tenants), 50_000):
            end = start + 50_000
            self.db.conn.execute(
                _CRON_JOBS_SQL,
                {
                    "ids": ids[start:end],
                    "tenants": tenants[start:end],
                    "schedules": schedules[start:end],
                    "fires": fires[start:end],
                    "type": kind,
                    "now": now,
                },
            )

    def dispatch(self, *, now: datetime, expect: int) -> tuple[float, int]:
        """run_once with the real CeleryPublisher until nothing is left due at `now`: the time it
        took and how many it claimed. The order of what was admitted is kept in self.order."""
        from background.publisher import CeleryPublisher
        from dispatcher import dispatcher

        publisher = CeleryPublisher()
        order: list[str] = []

        class Recording:
            def publish(self, dispatches) -> None:
                order.extend(d.execution_id for d in dispatches)
                publisher.publish(dispatches)

        self.bench.purge(QUEUE)
        self.db.capacity(FLEET_SLOTS)
        claimed, on_broker, elapsed = 0, 0, 0.0
        while True:
            started = time.perf_counter()
            result = dispatcher.run_once(now=now, publisher=Recording(), limit=self.bench.batch)
            elapsed += time.perf_counter() - started
            if not result.claimed:
                break
            claimed += result.claimed
            on_broker += self.bench.fleet_takes()
        self.db.capacity(0)
        if claimed != expect or on_broker != expect:
            raise RuntimeError(f"cron dispatch: claimed {claimed}, on the broker {on_broker}, due {expect}")
        self.order = order
        return elapsed, claimed

    def first_before_fifth(self, tenants: list[int]) -> bool:
        """Whether, in the order the last dispatch admitted, every tenant's first came before any
        tenant's fifth."""
        tenant_of = dict(
            self.db.conn.execute(
                "SELECT id::text, tenant_id FROM executions_execution WHERE id = ANY(%s::uuid[])", [self.order]
            ).fetchall()
        )
        seen: dict[int, int] = {}
        last_first, first_fifth = -1, len(self.order)
        for position, execution_id in enumerate(self.order):
            tenant = tenant_of[execution_id]
            seen[tenant] = seen.get(tenant, 0) + 1
            if seen[tenant] == 1:
                last_first = position
            elif seen[tenant] == 5:
                first_fifth = min(first_fifth, position)
        return len(seen) == len(tenants) and last_first < first_fifth

    def retire(self, tenant: int) -> None:
        """Out of the way of the next figures: the tenant's jobs cancelled and their work done."""
        self.db.conn.execute("UPDATE jobs_job SET state = 'CANCELLED' WHERE tenant_id = %s", [tenant])
        self.db.conn.execute(
            "UPDATE executions_execution SET state = 'CANCELLED', republish_at = NULL, finished_at = now()"
            " WHERE tenant_id = %s AND state IN ('PENDING', 'QUEUED')",
            [tenant],
        )

    def beat_minute(self, count: int) -> float:
        """django-celery-beat's DatabaseScheduler at `count` crontabs: ms to send one minute's
        due tasks (bench/beat.py, in a process with its own settings and database)."""
        out = subprocess.run(
            [sys.executable, str(Path(ROOT) / "bench" / "beat.py"), "--schedules", str(count)],
            cwd=ROOT,
            env={**self.bench.env, "TICKWORK_BENCH_BEAT_DB": f"{self.cfg.db_name}_beat"},
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            raise RuntimeError(f"bench/beat.py failed:\n{out.stdout}\n{out.stderr}")
        return float(json.loads(out.stdout.strip().splitlines()[-1])["ms"])

"""The benchmark's stages: dispatch throughput, end to end and the due → start lag, each beside a
baseline measured in the same run, and the order of the others (bench/statements.py first)."""

import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.config import BASELINE_QUEUE, DEFAULT_TRANSPORT_QUEUE, FLEET_SLOTS, QUEUE, Config, log
from bench.cost import Cost
from bench.creation import Creation
from bench.cron import Cron
from bench.database import Database
from bench.dispatchers import Dispatchers
from bench.fairness import Fairness
from bench.processes import CpuMeter, Processes, wait_for
from bench.procrastinate_baseline import Procrastinate
from bench.ratelimit import RateLimits
from bench.results import Figure, median, percentile
from bench.retention import Retention
from bench.statements import Statements
from bench.workflows import Workflows

# --- The benchmark ----------------------------------------------------------------------------------


class Bench:
    def __init__(self, cfg: Config, db: Database, small: Database, broker_url: str, env: dict, log_dir: Path):
        import redis

        self.cfg, self.db, self.small, self.env = cfg, db, small, env
        self.redis = redis.Redis.from_url(broker_url)
        self.procs = Processes(env, log_dir)
        self.figures: list[Figure] = []
        self.info: dict = {}
        self.cost = Cost(self)  # what a job writes, beside the figures (bench/cost.py)
        self.dispatcher_ready = False  # warm_dispatcher ran

    @property
    def batch(self) -> int:
        from django.conf import settings

        return self.cfg.batch or settings.TICKWORK_DISPATCH_BATCH

    # -- the broker

    def queue_keys(self, queue: str) -> list[str]:
        """The Redis lists of a queue, one per priority step, as kombu names them."""
        from scheduler_project.celery import app

        with app.connection_for_write() as conn:
            channel = conn.default_channel
            return [channel._q_for_pri(queue, p) for p in channel.priority_steps]

    def queue_length(self, queue: str) -> int:
        return sum(self.redis.llen(k) for k in self.queue_keys(queue))

    def purge(self, queue: str) -> None:
        self.redis.delete(*self.queue_keys(queue))

    # -- the run

    def run(self) -> None:
        cfg = self.cfg
        self.fill()
        if "statements" in cfg.stages:
            Statements(self).run()
        if not cfg.keep:
            self.small.drop()
        if "dispatch" in cfg.stages:
            self.dispatch()
        if "cron" in cfg.stages:
            Cron(self).run()
        if "dispatchers" in cfg.stages:
            Dispatchers(self).run()
        if "http" in cfg.stages:
            Creation(self).run()
            self.procs.stop_all()
        if {"e2e", "lag", "workflows", "fairness", "ratelimit"} & set(cfg.stages):
            # Without the dispatch stage the statements' due set is still due: the workers would
            # run it first, under the rounds' and the rate limit's figures.
            self.db.cancel_due()
            # The dispatch rounds left ~100k dead row versions: vacuum now, or autovacuum would
            # do it during the Tickwork rounds only (the baseline does not touch PostgreSQL).
            self.db.vacuum()
            for queue in (QUEUE, BASELINE_QUEUE, DEFAULT_TRANSPORT_QUEUE):
                self.purge(queue)
            self.procs.worker("bench-tickwork", QUEUE, cfg)
            self.procs.worker("bench-baseline", BASELINE_QUEUE, cfg)
            if "e2e" in cfg.stages:
                acks = {"TICKWORK_REDIS_ACK_EMULATION": "true"}
                self.procs.worker("bench-baseline-default-transport", DEFAULT_TRANSPORT_QUEUE, cfg, acks)
            self.procs.start("bench-dispatcher", [sys.executable, "manage.py", "run_dispatcher"])
            self.wait_for_workers(
                ["bench-tickwork", "bench-baseline"]
                + (["bench-baseline-default-transport"] if "e2e" in cfg.stages else [])
            )
            self.end_to_end() if "e2e" in cfg.stages else self.warm_up()
            if "lag" in cfg.stages:
                self.lag()
            if "workflows" in cfg.stages:
                Workflows(self).run()
            if "fairness" in cfg.stages:
                Fairness(self).run()
            if "ratelimit" in cfg.stages:
                RateLimits(self).run()
        if "retention" in cfg.stages:
            Retention(self).run()  # last: it leaves the retention window's rows behind

    def fill(self) -> None:
        """The full database: `pending` future executions and one round's due set. The small one:
        a tenth of the future and the same due set. The due set only for the stages that claim
        it: left due, the workers of the later stages would run it first."""
        cfg, now = self.cfg, datetime.now(UTC)
        small = max(cfg.pending // 10, 1)
        due = cfg.due if {"statements", "dispatch"} & set(cfg.stages) else 0
        for db, count in ((self.db, cfg.pending), (self.small, small)):
            log(f"{db.name}: filling {count:,} future and {due:,} due executions")
            began = time.perf_counter()
            db.insert(tenant=db.tenant("bench-fill"), count=count, start=now + timedelta(hours=1), span=30 * 86400)
            if due and db is self.db:
                db.insert(tenant=db.tenant("bench-due-0"), count=due, start=now - timedelta(seconds=120), span=60)
            elif due:
                # The full one's, row for row: a claim captured on one chooses the same rows on
                # the other, so its statements (ids and all) are timed as they are on both.
                db.copy_tenant(self.db, db.tenant("bench-due-0"))
            db.vacuum()
            log(f"  {time.perf_counter() - began:.1f}s; {db.pending():,} pending")
        self.info["pending_small"] = small

    # 2. Dispatch throughput: due executions claimed and on the broker, against apply_async.

    def warm_dispatcher(self) -> None:
        """Once, before the first timed claim: what a dispatcher process does before its own first
        claim (dispatcher.ready, as `serve` calls it), then one claim of a few executions of their
        own, untimed, as warm_up does for the workers. A dispatcher is a long-running process, and
        its first claim pays once what its process needs: the live views' channel layer imported
        (its first state changes' announce), the broker's connection opened, the statements
        prepared. In this script that first claim was the dispatch round's: up to 0.2 s of a
        round of 3,000 (profiled)."""
        from background.publisher import CeleryPublisher
        from dispatcher import dispatcher

        if self.dispatcher_ready:
            return
        self.dispatcher_ready = True
        # Due before the stages' due sets and herds are: a claim as of then takes these only.
        at = datetime.now(UTC) - timedelta(minutes=10)
        self.db.insert(tenant=self.db.tenant("bench-warm-up"), count=10, start=at, span=1, priority=1)
        self.db.capacity(FLEET_SLOTS)
        dispatcher.run_once(now=at + timedelta(seconds=2), publisher=CeleryPublisher(), limit=self.batch)
        self.fleet_takes()
        self.db.capacity(0)
        dispatcher.ready()

    def dispatch(self) -> None:
        cfg = self.cfg
        self.warm_dispatcher()
        log(f"dispatch: {cfg.rounds} round(s) of {cfg.due:,} due among {cfg.pending:,} future, batch {self.batch}")
        ours, theirs = [], []
        for r in range(cfg.rounds):
            self.db.capacity(FLEET_SLOTS)  # no worker runs: a registered fleet stands in (fleet_takes)
            if r:
                start = datetime.now(UTC) - timedelta(seconds=120)
                self.db.insert(tenant=self.db.tenant(f"bench-due-{r}"), count=cfg.due, start=start, span=60)
                self.db.vacuum()
            with self.cost.measure(f"dispatch, round {r + 1} (claim and publish)", jobs=cfg.due):
                ours.append(self.dispatch_round())
            theirs.append(self.apply_async_round())
            log(f"  round {r + 1}: dispatch {ours[-1]:,.0f}/s, apply_async loop {theirs[-1]:,.0f}/s")
        self.db.capacity(0)
        self.add("dispatch throughput", "/s", ours, theirs, "apply_async loop", 5.0)

    def dispatch_round(self) -> float:
        """dispatcher.run_once with the real CeleryPublisher until the due set is claimed; everything
        claimed is on the broker when each returns (publishing happens on commit). Between two
        claims, untimed, a fleet of FLEET_SLOTS takes what was admitted (`fleet_takes`)."""
        from django.utils import timezone

        from background.publisher import CeleryPublisher
        from dispatcher import dispatcher

        publisher = CeleryPublisher()
        self.purge(QUEUE)
        claimed, on_broker, elapsed = 0, 0, 0.0
        while claimed < self.cfg.due:
            started = time.perf_counter()
            result = dispatcher.run_once(now=timezone.now(), publisher=publisher, limit=self.batch)
            elapsed += time.perf_counter() - started
            if not result.claimed:
                break
            claimed += result.claimed
            on_broker += self.fleet_takes()
        if claimed != self.cfg.due or on_broker != self.cfg.due:
            raise RuntimeError(f"dispatch round: claimed {claimed}, on the broker {on_broker}, due {self.cfg.due}")
        return self.cfg.due / elapsed

    def fleet_takes(self) -> int:
        """The stand-in fleet's part between two claims (untimed): its workers take what was
        admitted, so the pool has room again and what is admitted stays near the fleet's slots, as
        in production (where a claim counts what is admitted: a stand-in that let 30,000 pile up
        made each claim count them). Bookkeeping, not a transition. Returns how many were on the
        broker."""
        on_broker = self.queue_length(QUEUE)
        self.purge(QUEUE)
        with self.db.conn.transaction():
            xid = self.db.scalar("SELECT txid_current()")
            done = self.db.conn.execute(
                "UPDATE executions_execution SET state = 'SUCCEEDED', republish_at = NULL, finished_at = now()"
                " WHERE state = 'QUEUED'"
            ).rowcount
        self.cost.set_aside(xid, done)  # the fleet's writes, not the dispatcher's
        return on_broker

    def apply_async_round(self) -> float:
        """The same messages, one `apply_async` each: what publishing costs without batching."""
        from worker.tasks import run_execution

        self.purge(QUEUE)
        ids = [str(uuid.uuid4()) for _ in range(self.cfg.due)]
        started = time.perf_counter()
        for execution_id in ids:
            run_execution.apply_async(args=(execution_id, 1), queue=QUEUE)
        elapsed = time.perf_counter() - started
        on_broker = self.queue_length(QUEUE)
        self.purge(QUEUE)
        # What the round admitted was purged from the broker: out of the way of the pool's
        # admission in the next round and stages (bookkeeping, not a transition).
        self.db.conn.execute(
            "UPDATE executions_execution SET state = 'CANCELLED', republish_at = NULL, finished_at = now()"
            " WHERE state = 'QUEUED'"
        )
        if on_broker != self.cfg.due:
            raise RuntimeError(f"apply_async round: {on_broker} on the broker, sent {self.cfg.due}")
        return self.cfg.due / elapsed

    # 3. End to end: noop jobs run by real workers with outcomes in PostgreSQL, against bare Celery.

    def warm_up(self) -> None:
        """A first round on each side, not counted: workers' first tasks import and connect."""
        log("warming up the workers")
        self.tickwork_e2e_round("warm-up", min(200, self.cfg.e2e))
        self.celery_e2e_round(min(200, self.cfg.e2e), BASELINE_QUEUE)
        if "e2e" in self.cfg.stages:
            self.celery_e2e_round(min(200, self.cfg.e2e), DEFAULT_TRANSPORT_QUEUE)

    def end_to_end(self) -> None:
        cfg = self.cfg
        self.warm_up()
        log(f"end to end: {cfg.rounds} round(s) of {cfg.e2e:,} noop jobs, prefork x {cfg.concurrency}")
        procrastinate = Procrastinate(self)
        procrastinate.start()
        procrastinate.round(min(200, cfg.e2e))  # its warm-up
        ours, default_transport, same_transport, theirs = [], [], [], []
        try:
            for r in range(cfg.rounds):
                # From the create to the recorded outcome: the whole of a job's writes.
                meter = CpuMeter(self.procs)
                before = meter.snapshot()
                with self.cost.measure(f"end to end, round {r + 1} (create to outcome)", jobs=cfg.e2e, others=True):
                    ours.append(self.tickwork_e2e_round(str(r), cfg.e2e))
                # Beside the rate, what does not depend on the machine's load: the CPU each role
                # spent per job (PostgreSQL's and "other" count every client's, not only ours).
                cpu = meter.per_job(before, meter.snapshot(), cfg.e2e)
                log(f"  CPU ms per job, end to end: {cpu}")
                self.info.setdefault("e2e_cpu_ms_per_job", []).append(cpu)
                before = meter.snapshot()
                default_transport.append(self.celery_e2e_round(cfg.e2e, DEFAULT_TRANSPORT_QUEUE))
                log(f"  CPU ms per bare Celery task, end to end: {meter.per_job(before, meter.snapshot(), cfg.e2e)}")
                same_transport.append(self.celery_e2e_round(cfg.e2e, BASELINE_QUEUE))
                theirs.append(procrastinate.round(cfg.e2e))
                log(
                    f"  round {r + 1}: tickwork {ours[-1]:,.0f}/s, bare Celery {default_transport[-1]:,.0f}/s"
                    f" (kombu's default transport), {same_transport[-1]:,.0f}/s (no ack emulation, as Tickwork);"
                    f" Procrastinate {theirs[-1]:,.0f}/s"
                )
        finally:
            self.procs.stop("bench-procrastinate")
            procrastinate.drop()
        self.add("end-to-end noop", "/s", ours, theirs, "Procrastinate's worker, no-op task", 1.4)
        self.add("end-to-end noop", "/s", ours, default_transport, "bare Celery noop, default transport", 0.6)
        # For reference, no target: bare Celery without ack emulation loses a crashed worker's
        # messages (at-most-once), which Tickwork can afford only because its rows are the truth.
        self.add("end-to-end noop", "/s", ours, same_transport, "bare Celery noop, no ack emulation", None)

    def tickwork_e2e_round(self, label: str, count: int) -> float:
        """`count` due noop jobs committed at once (and the dispatcher woken, as the API would):
        SUCCEEDED per second, from the commit to the last finished_at."""
        tenant = self.db.tenant(f"bench-e2e-{label}")
        due = datetime.now(UTC) - timedelta(seconds=1)
        self.db.insert(tenant=tenant, count=count, start=due, span=0.5, notify=True)
        committed = time.time()
        wait_for(
            lambda: self.db.all_succeeded(tenant, count),
            timeout=max(120, count / 20),
            what="the end-to-end round",
            interval=0.05,
            procs=self.procs,
        )
        last = self.db.scalar(
            "SELECT extract(epoch FROM max(finished_at)) FROM executions_execution WHERE tenant_id = %s", [tenant]
        )
        return count / (float(last) - committed)

    def celery_e2e_round(self, count: int, queue: str) -> float:
        """`count` no-op tasks and a last one that records when it ran, enqueued together as
        Tickwork's publisher enqueues (one pipeline): tasks per second from enqueue to the last."""
        from celery.utils.nodenames import anon_nodename

        from background.publisher import RedisEnvelope
        from scheduler_project.celery import app

        key = f"tickwork_bench:mark:{uuid.uuid4().hex}"
        noop = RedisEnvelope("tickwork_bench.noop", origin=anon_nodename(), reply_to=app.thread_oid)
        mark = RedisEnvelope("tickwork_bench.mark", origin=anon_nodename(), reply_to=app.thread_oid)
        started = time.time()
        messages = [noop.render((), queue) for _ in range(count)] + [mark.render((key,), queue)]
        pipe = self.redis.pipeline(transaction=False)
        for start in range(0, len(messages), 1000):
            pipe.lpush(queue, *messages[start : start + 1000])
        pipe.execute()
        wait_for(
            lambda: self.redis.llen(key) > 0,
            timeout=max(120, count / 20),
            what="the bare Celery round",
            interval=0.02,
            procs=self.procs,
        )
        last = float(self.redis.lpop(key))
        self.redis.delete(key)
        return count / (last - started)

    # 4. Due → start lag at a steady offered load.

    def lag(self) -> None:
        cfg = self.cfg
        seconds = cfg.lag_seconds / cfg.rounds
        log(f"lag: {cfg.lag_rate:.0f} jobs/s, {cfg.rounds} segment(s) of {seconds:.0f}s each side")
        ours, theirs = [], []
        for r in range(cfg.rounds):
            ours += self.tickwork_lag(r, seconds)
            theirs += self.celery_lag(seconds)
            log(f"  segment {r + 1}: tickwork p50 {percentile(ours, 50):.1f} ms p99 {percentile(ours, 99):.1f} ms;"
                f" bare Celery p50 {percentile(theirs, 50):.1f} ms p99 {percentile(theirs, 99):.1f} ms")  # fmt: skip
        for q, limit in ((50, 20.0), (99, 100.0)):
            value, baseline = percentile(ours, q), percentile(theirs, q)
            self.figures.append(
                Figure(
                    f"due → start lag p{q}",
                    "ms",
                    value,
                    baseline,
                    "bare Celery publish → start",
                    f"≤ {limit:.0f} ms",
                    value <= limit,
                    {"count": len(ours), "baseline_count": len(theirs)},
                )
            )

    def tickwork_lag(self, segment: int, seconds: float) -> list[float]:
        """A feeder makes one-off jobs due the moment they are made, each committed with its
        wake-up as scheduling.job_creation does; lag = started_at - scheduled_for, from the rows."""
        tenant = self.db.tenant(f"bench-lag-{segment}")
        meter = CpuMeter(self.procs)
        before = meter.snapshot()
        sent = self.feed(seconds, lambda at: self.db.insert(tenant=tenant, count=1, start=at, span=0, notify=True))
        wait_for(
            lambda: self.db.all_succeeded(tenant, sent),
            timeout=120,
            what="the lag test's jobs",
            interval=0.05,
            procs=self.procs,
        )
        cpu = meter.per_job(before, meter.snapshot(), sent)
        log(f"  CPU ms per job: {cpu}")
        self.info.setdefault("lag_cpu_ms_per_job", []).append(cpu)
        rows = self.db.conn.execute(
            "SELECT extract(epoch FROM started_at - scheduled_for) FROM executions_execution WHERE tenant_id = %s",
            [tenant],
        ).fetchall()
        return [float(row[0]) * 1000 for row in rows]

    def celery_lag(self, seconds: float) -> list[float]:
        """The same feeder calling apply_async on a task that records how late it started."""
        from bench.baseline_tasks import lag

        key = f"tickwork_bench:lag:{uuid.uuid4().hex}"
        meter = CpuMeter(self.procs)
        before = meter.snapshot()
        sent = self.feed(seconds, lambda at: lag.apply_async(args=(key, at.timestamp()), queue=BASELINE_QUEUE))
        wait_for(
            lambda: self.redis.llen(key) >= sent, timeout=120, what="the baseline lag tasks", interval=0.05,
            procs=self.procs,
        )  # fmt: skip
        cpu = meter.per_job(before, meter.snapshot(), sent)
        log(f"  CPU ms per bare Celery task: {cpu}")
        self.info.setdefault("lag_baseline_cpu_ms_per_task", []).append(cpu)
        values = [float(v) * 1000 for v in self.redis.lrange(key, 0, -1)]
        self.redis.delete(key)
        return values

    def feed(self, seconds: float, submit: Callable[[datetime], None]) -> int:
        """Call `submit(now)` `lag_rate` times a second, on a fixed schedule, for `seconds`."""
        total = int(self.cfg.lag_rate * seconds)
        interval = 1.0 / self.cfg.lag_rate
        started = time.perf_counter()
        for i in range(total):
            delay = started + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            submit(datetime.now(UTC))
        achieved = total / (time.perf_counter() - started)
        if achieved < 0.95 * self.cfg.lag_rate:
            log(f"  the feeder managed only {achieved:.0f}/s of {self.cfg.lag_rate:.0f}/s")
        self.info.setdefault("lag_offered_per_second", []).append(round(achieved))
        return total

    # -- helpers

    def wait_for_workers(self, names: list[str]) -> None:
        from scheduler_project.celery import app

        def ready() -> bool:
            replies = app.control.ping(timeout=0.5)
            return set(names) <= {node.split("@")[0] for reply in replies for node in reply}

        wait_for(ready, timeout=60, what="the workers to start", interval=0.2, procs=self.procs)

    def add(self, name: str, unit: str, ours: list, theirs: list, baseline_name: str, at_least: float | None) -> None:
        value, baseline = median(ours), median(theirs)
        passed = at_least is None or value >= at_least * baseline
        target = "reference" if at_least is None else f"≥ {at_least:g}x baseline"
        self.figures.append(
            Figure(name, unit, value, baseline, baseline_name, target, passed, {"ours": ours, "baseline": theirs})
        )

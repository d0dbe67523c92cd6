#!/usr/bin/env python
"""The workflows stage's probe (bench/workflows.py runs it while the bench's workers and
dispatcher are up): what releasing a workflow step costs beside what starting a one-off costs,
measured in the same process over the same seconds. Prints one line of JSON, one entry per
measurement (a Feed below), each with its samples in ms, their p50/p99 and a breakdown.

- release: `--chains` workflow jobs of `--steps` `noop` steps in a chain (s0 → s1 → …), each
  made by `scheduling.job_creation.job_create` as the API makes it (type ONCE, due now). Latency
  per edge: the downstream step's `started_at` - its upstream step's `finished_at` (the handler's
  return; the release itself happens when that success is recorded).
- one_off: as many one-off `noop` jobs through the same `job_create`, due the moment they are
  made; lag = `started_at` - `scheduled_for`.

Both feeds share one fixed schedule: a chain every `--interval` seconds and a one-off every
`interval / steps`, so one-offs start at about the rate steps do and a few chains are in flight at
once. A chain and a one-off made first, to completion, are not counted (first statements of the
probe's connection, first workflow steps of the workers' processes).

Runs in a process of its own, as a web process would create jobs: its own connection, its own
database clock (`executions.clock`), its CPU apart from the bench script's. The environment is the
bench's (DATABASE_URL names the bench's database)."""

import argparse
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")

OPEN_STATES = ("BLOCKED", "PENDING", "QUEUED", "RUNNING")


# --- Measurements -----------------------------------------------------------------------------------


class Feed:
    """One measurement: what it makes at each of its `count` turns, `interval` seconds apart on the
    schedule all feeds share (`submit`), how many executions must end SUCCEEDED, and, once they
    have, its samples read back from the rows. Its jobs are named after it (`job_name`)."""

    name = ""

    def __init__(self, *, tenant, pool: str, steps: int, count: int, interval: float) -> None:
        self.tenant, self.pool, self.steps = tenant, pool, steps
        self.count, self.interval = count, interval
        self.submitted = 0
        self.create_ms: list[float] = []  # each job_create's wall time: the one-offs' lag includes it

    @property
    def job_name(self) -> str:
        return f"bench {self.name}"

    def submit(self, now: datetime) -> None:
        raise NotImplementedError

    def expected(self) -> int:
        raise NotImplementedError

    def measure(self) -> dict:
        raise NotImplementedError

    def create(self, fields: dict, now: datetime) -> None:
        from scheduling.job_creation import job_create

        began = time.perf_counter()
        job_create(tenant=self.tenant, fields={"name": self.job_name, "type": "ONCE", "run_at": now, **fields}, now=now)
        self.create_ms.append((time.perf_counter() - began) * 1000)
        self.submitted += 1

    def executions(self):
        from executions.models import Execution

        return Execution.objects.filter(tenant=self.tenant, job__name=self.job_name)


class Chains(Feed):
    """Workflow jobs whose steps form a chain: every step but the first is released by the one
    before it. Samples: one per edge, downstream `started_at` - upstream `finished_at`."""

    name = "release"

    def workflow(self) -> dict:
        def step(i: int) -> dict:
            depends = [f"s{i - 1}"] if i else []
            return {
                "name": f"s{i}",
                "target": {"pool": self.pool, "handler": "noop"},
                "payload": {},
                "depends_on": depends,
            }

        return {"steps": [step(i) for i in range(self.steps)]}

    def submit(self, now: datetime) -> None:
        self.create({"workflow": self.workflow(), "pool": "", "handler": ""}, now)

    def expected(self) -> int:
        return self.submitted * self.steps

    def measure(self) -> dict:
        from executions.models import Run

        rows, first = _executions_and_first_events(self.executions())
        by_step = {(r["run_id"], r["step"]): r for r in rows}
        total, outcome, claim, start = [], [], [], []
        runs = Run.objects.filter(tenant=self.tenant, job__name=self.job_name)
        for run_id, steps in runs.values_list("id", "steps"):
            for spec in steps:
                above = spec.get("depends_on") or []
                if not above:
                    continue
                down = by_step[(run_id, spec["name"])]
                # The last upstream success is what releases a step (one, in a chain).
                finished = max(by_step[(run_id, name)]["finished_at"] for name in above)
                released = first[(down["id"], "BLOCKED", "PENDING")]
                claimed = first[(down["id"], "PENDING", "QUEUED")]
                total.append(_ms(down["started_at"] - finished))
                # The SUCCEEDED event is stamped with the handler's return (as finished_at); the
                # release's event with the `now` of the outcome batch that recorded it, after
                # whatever the outcome thread was committing before.
                outcome.append(_ms(released - finished))
                claim.append(_ms(claimed - released))
                start.append(_ms(down["started_at"] - claimed))
        return _summary(
            total,
            {
                "outcome thread: handler return → success recorded (its queue)": outcome,
                "that commit, the dispatcher's wake-up and claim": claim,
                "publish, broker, worker start": start,
            },
            create_ms=self.create_ms,
            runs=self.submitted,
            retried=sum(1 for r in rows if r["attempt"] > 1),
        )


class OneOffs(Feed):
    """One-off noop jobs due the moment they are made. Samples: `started_at` - `scheduled_for`."""

    name = "one_off"

    def submit(self, now: datetime) -> None:
        self.create({"pool": self.pool, "handler": "noop"}, now)

    def expected(self) -> int:
        return self.submitted

    def measure(self) -> dict:
        rows, first = _executions_and_first_events(self.executions())
        total, claim, start = [], [], []
        for r in rows:
            claimed = first[(r["id"], "PENDING", "QUEUED")]
            total.append(_ms(r["started_at"] - r["scheduled_for"]))
            claim.append(_ms(claimed - r["scheduled_for"]))
            start.append(_ms(r["started_at"] - claimed))
        return _summary(
            total,
            {"the create's commit, the dispatcher's wake-up and claim": claim, "publish, broker, worker start": start},
            create_ms=self.create_ms,
            runs=self.submitted,
            retried=sum(1 for r in rows if r["attempt"] > 1),
        )


class Events(Feed):
    """Events posted as POST /v1/events stores them (events.services.event_receive), each matching
    one EVENT job made up front: its run starts one noop execution, due the moment the event is
    stored. Samples: `started_at` - the event's `received_at`."""

    name = "event"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        from executions.clock import db_now
        from scheduling.job_creation import job_create

        job_create(
            tenant=self.tenant,
            fields={
                "name": self.job_name,
                "type": "EVENT",
                "event_name": "bench.happened",
                "pool": self.pool,
                "handler": "noop",
            },
            now=db_now(),
        )

    def submit(self, now: datetime) -> None:
        from events.models import EventSource
        from events.services import event_receive
        from executions.clock import db_now

        began = time.perf_counter()
        # The time the API would stamp it with: the database's.
        event_receive(tenant=self.tenant, name="bench.happened", payload={}, source=EventSource.API, now=db_now())
        self.create_ms.append((time.perf_counter() - began) * 1000)
        self.submitted += 1

    def expected(self) -> int:
        return self.submitted

    def measure(self) -> dict:
        from events.models import Event

        received = dict(Event.objects.filter(tenant=self.tenant).values_list("id", "received_at"))
        rows, first = _executions_and_first_events(self.executions())
        total, claim, start = [], [], []
        for r in rows:
            claimed = first[(r["id"], "PENDING", "QUEUED")]
            at = received[r["event_id"]]
            total.append(_ms(r["started_at"] - at))
            claim.append(_ms(claimed - at))
            start.append(_ms(r["started_at"] - claimed))
        return _summary(
            total,
            {"the event's commit, the dispatcher's wake-up and claim": claim, "publish, broker, worker start": start},
            create_ms=self.create_ms,
            runs=self.submitted,
            retried=sum(1 for r in rows if r["attempt"] > 1),
        )


def event_feeds(*, tenant, pool: str, steps: int, chains: int, interval: float) -> list[Feed]:
    """The event → start lag, measured beside the two above on the same schedule, at the rate a
    chain starts executions (`chains * steps` events, `interval / steps` apart)."""
    return [Events(tenant=tenant, pool=pool, steps=steps, count=chains * steps, interval=interval / steps)]


# --- The probe --------------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from tenants.services import tenant_create

    def feeds(label: str, chains: int) -> list[Feed]:
        # One tenant for every feed: admission shares a pool between tenants, and a tenant with a
        # long queue of one-offs beside one with a step or two due would be served less often,
        # which is fair share, not what a release costs. In one tenant a released step and a
        # one-off due at the same instant wait in the same line (priority, then due time).
        tenant = tenant_create(slug=f"bench-wf-{label}-{uuid.uuid4().hex[:8]}")
        # A chain every `interval`, a one-off `steps` times as often: both start executions at
        # about the same rate, over the same seconds.
        common = {"tenant": tenant, "pool": args.pool, "steps": args.steps}
        made: list[Feed] = [
            Chains(count=chains, interval=args.interval, **common),
            OneOffs(count=chains * args.steps, interval=args.interval / args.steps, **common),
        ]
        return made + event_feeds(chains=chains, interval=args.interval, **common)

    warm = feeds("warm-up", 1)
    for feed in warm:
        feed.submit(datetime.now(UTC))
    wait_until_done(warm, timeout=args.timeout)

    measured = feeds("measured", args.chains)
    turns = sorted((i * feed.interval, n, feed) for n, feed in enumerate(measured) for i in range(feed.count))
    began = time.perf_counter()
    for offset, _, feed in turns:
        delay = began + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        feed.submit(datetime.now(UTC))
    fed = time.perf_counter() - began
    wait_until_done(measured, timeout=args.timeout)
    result = {feed.name: feed.measure() for feed in measured}
    result["feed"] = {
        "seconds": round(fed, 3),
        "planned_seconds": round(turns[-1][0], 3),
        "creates_per_second": round(len(turns) / fed, 1) if fed else None,
        "steps_per_chain": args.steps,
    }
    print(json.dumps(result))


def wait_until_done(feeds: list[Feed], *, timeout: float) -> None:
    """Until every execution of the feeds' tenant has ended, then check that all SUCCEEDED."""
    from executions.models import Execution

    tenants = list({feed.tenant.pk: feed.tenant for feed in feeds}.values())
    deadline = time.monotonic() + timeout
    # Reads the unfinished rows only (a few index probes), every 50 ms, beside the workers.
    while Execution.objects.filter(tenant__in=tenants, state__in=OPEN_STATES).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {timeout:.0f}s: {_states(tenants)}")
        time.sleep(0.05)
    for feed in feeds:
        succeeded = feed.executions().filter(state="SUCCEEDED").count()
        if succeeded != feed.expected():
            raise RuntimeError(f"{feed.name}: {succeeded} SUCCEEDED of {feed.expected()}: {_states([feed.tenant])}")


# --- Helpers ----------------------------------------------------------------------------------------


def _executions_and_first_events(executions) -> tuple[list[dict], dict]:
    """The executions' rows, and the first time of each (execution, from, to) move of theirs."""
    from django.db.models import Min

    from executions import history
    from executions.models import ExecutionEvent

    rows = list(
        executions.values("id", "run_id", "step", "event_id", "attempt", "scheduled_for", "started_at", "finished_at")
    )
    events = (
        ExecutionEvent.objects.filter(execution__in=executions.values("id"))
        .values("execution_id", "from_state", "to_state")
        .annotate(first=Min("at"))
    )
    first = {(e["execution_id"], e["from_state"], e["to_state"]): e["first"] for e in events}
    # A step on the happy path has no event rows: its columns tell them (executions/history.py).
    for execution in executions.filter(history_derived=True).only(*history.COLUMNS):
        for event in history.derived(execution):
            first.setdefault((execution.pk, event.from_state, event.to_state), event.at)
    return rows, first


def _summary(total: list[float], segments: dict[str, list[float]], create_ms: list[float], **counts: int) -> dict:
    """p50/p99 of the samples, and for each segment its p50 and its share of the mean (means add
    up where percentiles do not); the p50 and p99 of the feed's creates."""
    from bench.results import percentile

    def ms(value: float) -> float:
        return round(value, 3)

    return {
        "count": len(total),
        "p50": ms(percentile(total, 50)),
        "p99": ms(percentile(total, 99)),
        "mean": ms(sum(total) / len(total)) if total else float("nan"),
        "segments": {
            name: {
                "p50": ms(percentile(values, 50)),
                "mean": ms(sum(values) / len(values)),
                "share": round(sum(values) / sum(total), 3),
            }
            for name, values in segments.items()
            if values
        },
        "create_ms": {"p50": ms(percentile(create_ms, 50)), "p99": ms(percentile(create_ms, 99))},
        "samples": [ms(v) for v in total],
        **counts,
    }


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


def _states(tenants: list) -> dict[str, int]:
    from django.db.models import Count

    from executions.models import Execution

    counts = Execution.objects.filter(tenant__in=tenants).values("state").annotate(n=Count("id"))
    return {c["state"]: c["n"] for c in counts}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", type=int, default=20, help="chains measured (20)")
    parser.add_argument("--steps", type=int, default=10, help="steps per chain (10)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between two chains' creates (0.2)")
    parser.add_argument("--pool", default="default", help="the pool of every step and one-off (default)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the runs to end (120)")
    main(parser.parse_args())

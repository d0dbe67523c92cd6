"""The soak's plan: which jobs are submitted when, and when each fault strikes."""

import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from soak.config import FAULTS, KINDS, RETRY, Config

# --- The plan ---------------------------------------------------------------------------------------


@dataclass
class Planned:
    """A job the soak submits, and what it did to it."""

    kind: str
    token: str
    body: dict
    at: float  # seconds into the run at which it is submitted
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    job_id: str = ""
    cancel_answer: str = ""  # cancel-running: the execution's state in the cancel's answer


def plan(cfg: Config, tokens: list[str], rng: random.Random) -> list[Planned]:
    """The jobs, each with the moment it is submitted: one-off ones spread over the run, due
    within seconds of their submission; the cron jobs first."""
    kinds = rng.choices(list(KINDS), weights=list(KINDS.values()), k=cfg.jobs)
    # Each kind at least once, whatever the count.
    kinds[: len(KINDS)] = list(KINDS)
    jobs = []
    for n, kind in enumerate(kinds):
        at = rng.uniform(0, cfg.seconds)
        payload: dict = {"seconds": round(rng.uniform(0, 0.2), 3)}
        body: dict = {"name": f"soak {kind} {n}", "target": {"handler": "soak-effect"}, "retryPolicy": RETRY}
        if kind == "once":
            due = time.time() + at + rng.uniform(0, 5)
            body.update(type="ONCE", runAt=datetime.fromtimestamp(due, UTC).isoformat())
        elif kind == "cancel-pending":
            body.update(type="ONCE", runAt=datetime.fromtimestamp(time.time() + 3600, UTC).isoformat())
        else:
            body.update(type="DELAYED", delaySec=rng.randint(0, 3) if kind != "cancel-running" else 0)
        if kind == "flaky":
            payload["failTimes"] = rng.randint(1, 2)
        elif kind in ("slow", "cancel-running"):
            payload["seconds"] = round(rng.uniform(1.5, 4.0), 2)
        body["payload"] = payload
        body["timeoutSec"] = 300
        jobs.append(Planned(kind=kind, token=tokens[n % len(tokens)], body=body, at=at))
    zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]
    for n in range(cfg.cron_jobs):
        body = {
            "name": f"soak cron {n}",
            "type": "CRON",
            "schedule": "* * * * *",
            "timezone": zones[n % len(zones)],
            "target": {"handler": "soak-effect"},
            "payload": {"seconds": 0.05},
            "retryPolicy": RETRY,
            # Every fire runs, also those a dispatcher outage made late: none may go missing.
            "misfirePolicy": "RUN_ALL",
            "timeoutSec": 300,
        }
        jobs.append(Planned(kind="cron", token=tokens[n % len(tokens)], body=body, at=0.0))
    return sorted(jobs, key=lambda job: job.at)


def fault_times(cfg: Config, rng: random.Random) -> list[tuple[float, str]]:
    """Faults spread over the run after its first tenth, every kind at least once and in a random
    order; about one every 15 s."""
    start, end = cfg.seconds * 0.1, cfg.seconds
    count = max(len(FAULTS), int((end - start) / 15))
    kinds = list(FAULTS) + rng.choices(FAULTS, k=count - len(FAULTS))
    rng.shuffle(kinds)
    step = (end - start) / count
    return [(start + i * step + rng.uniform(0, step * 0.5), kind) for i, kind in enumerate(kinds)]

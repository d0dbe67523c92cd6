"""Whether a rule is breached, from facts already read (alerts/facts.py reads them): pure
functions, one per kind, each answering the breaching subjects and a summary naming the numbers,
so that the person paged knows what was seen without opening anything."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from readmodels.durations import duration, milliseconds
from store import percentile

# A failure rate over fewer finished runs than this does not page: 1 failure of 1 run is 100 %.
MIN_FINISHED = 10


@dataclass(frozen=True)
class Breach:
    subject: str  # what is breaching, stable between evaluations: "all", "pool:default", "job:<id>", "dispatcher"
    summary: str


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def failure_rate(
    *, subject: str, where: str, finished: int, dead: int, threshold: float, window_sec: int
) -> Breach | None:
    """Runs that ended DEAD (every attempt failed) over the runs that ended (SUCCEEDED or DEAD)
    within the window, as a percentage, above `threshold`; only over MIN_FINISHED runs or more.
    A failed attempt that a retry then saved is not a failure of the run."""
    if finished < MIN_FINISHED or finished == 0:
        return None
    rate = 100.0 * dead / finished
    if rate <= threshold:
        return None
    return Breach(
        subject,
        f"failure rate {rate:.0f}% ({dead} of {finished} runs ended DEAD) over {duration(window_sec)}{where}, "
        f"threshold {_number(threshold)}%",
    )


def start_lag_p99(
    *, subject: str, where: str, lags_ms: list[float], threshold_ms: float, window_sec: int
) -> Breach | None:
    """The p99 of the start lag (started_at - available_at, as the dashboard shows it) of the runs
    started within the window, above `threshold_ms`."""
    p99 = percentile(lags_ms, 0.99)
    if p99 is None or p99 <= threshold_ms:
        return None
    return Breach(
        subject,
        f"start lag p99 {milliseconds(p99)} over {len(lags_ms)} starts in {duration(window_sec)}{where} "
        f"(worst {milliseconds(max(lags_ms))}), threshold {milliseconds(threshold_ms)}",
    )


def dead_letter(
    *, subject: str, where: str, count: int, threshold: float, window_sec: int, examples: Iterable[str]
) -> Breach | None:
    """More than `threshold` executions went DEAD within the window."""
    if count <= threshold:
        return None
    named = ", ".join(examples)
    return Breach(
        subject,
        f"{count} execution{'s' if count != 1 else ''} went DEAD in the last {duration(window_sec)}{where} "
        f"(threshold {_number(threshold)})" + (f": {named}" if named else ""),
    )


def no_workers(*, pools: Iterable[str], live_workers: Mapping[str, int], waiting: Mapping[str, int]) -> list[Breach]:
    """Each pool with no live worker, saying how much work waits for it."""
    return [
        Breach(
            f"pool:{pool}",
            f"pool {pool} has no live worker; {waiting.get(pool, 0)} execution(s) due or queued wait for one",
        )
        for pool in sorted(set(pools))
        if live_workers.get(pool, 0) == 0
    ]


def scheduler_down(
    *, role: str, last_seen: datetime | None, last_error: str, now: datetime, threshold: float
) -> Breach | None:
    """No `role` (dispatcher or sweeper) has finished a unit of work for more than `threshold`
    seconds, or none ever has."""
    if last_seen is not None and (now - last_seen).total_seconds() <= threshold:
        return None
    what = (
        f"no {role} has finished a unit of work for {duration((now - last_seen).total_seconds())} "
        f"(last seen {last_seen.isoformat().replace('+00:00', 'Z')})"
        if last_seen is not None
        else f"no {role} has been seen running"
    )
    nothing = "nothing is being dispatched" if role == "dispatcher" else "lost runs are not being reclaimed"
    error = f"; its last error: {last_error}" if last_error else ""
    return Breach(role, f"{what}, threshold {duration(threshold)}: {nothing}{error}")


@dataclass(frozen=True)
class DueFire:
    job_id: str
    job_name: str
    scheduled_for: datetime
    state: str  # what the fire's execution is doing instead of running (PENDING: not claimed)


def missed_fire(*, fires: Iterable[DueFire], now: datetime, threshold: float) -> list[Breach]:
    """Each cron job whose fire is more than `threshold` seconds past due and has not started
    (the earliest such fire per job)."""
    earliest: dict[str, DueFire] = {}
    for fire in fires:
        if (now - fire.scheduled_for).total_seconds() <= threshold:
            continue
        if fire.job_id not in earliest or fire.scheduled_for < earliest[fire.job_id].scheduled_for:
            earliest[fire.job_id] = fire
    return [
        Breach(
            f"job:{fire.job_id}",
            f"cron job '{fire.job_name}' ({fire.job_id}) missed its "
            f"{fire.scheduled_for.strftime('%Y-%m-%d %H:%M:%S')} UTC fire by "
            f"{duration((now - fire.scheduled_for).total_seconds())} (threshold {duration(threshold)}); "
            f"it is still {fire.state}, not started",
        )
        for fire in sorted(earliest.values(), key=lambda f: (f.scheduled_for, f.job_id))
    ]


@dataclass(frozen=True)
class AutoPaused:
    job_id: str
    job_name: str
    reason: str  # the job's pausedReason
    paused_at: datetime


def job_auto_paused(*, jobs: Iterable[AutoPaused]) -> list[Breach]:
    """Each job that the system paused (its pauseAfterFailures reached) and nobody has resumed:
    the alert fires when the pause is seen and resolves when the job is resumed (or cancelled)."""
    return [
        Breach(
            f"job:{job.job_id}",
            f"job '{job.job_name}' ({job.job_id}) was {job.reason} "
            f"(at {job.paused_at.strftime('%Y-%m-%d %H:%M:%S')} UTC); it stays PAUSED until resumed",
        )
        for job in sorted(jobs, key=lambda j: (j.paused_at, j.job_id))
    ]

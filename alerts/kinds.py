"""What each kind of rule means: its threshold's unit and range, whether it reads a window, a
pool or a job. Pure: the API validates a rule with `rule_problems`, docs/alerts.md says the same."""

from dataclasses import dataclass

from alerts.models import AlertKind

K = AlertKind
WINDOW_MIN_SECONDS = 10
WINDOW_MAX_SECONDS = 7 * 24 * 3600
DEFAULT_WINDOW_SECONDS = 300
DAY = 24 * 3600


@dataclass(frozen=True)
class KindSpec:
    threshold: str  # what the threshold is, as the API's messages say it
    minimum: float | None  # None: the kind takes no threshold
    maximum: float | None
    default: float | None  # None with a minimum: the threshold is required
    window: bool  # it judges what happened within windowSec
    pool: bool  # `pool` narrows it
    job: bool  # `jobId` narrows it
    below_maximum: bool = False  # the maximum itself is not allowed (a rate above 100 % never happens)


SPECS: dict[str, KindSpec] = {
    K.FAILURE_RATE: KindSpec("a percentage from 0 to 100 (exclusive)", 0, 100, None, True, True, True, True),
    K.START_LAG_P99: KindSpec("milliseconds, from 1 to 86400000", 1, DAY * 1000, None, True, True, True),
    K.DEAD_LETTER: KindSpec("a count of executions, from 0 to 1000000 (0: any)", 0, 1_000_000, 0, True, True, True),
    K.NO_WORKERS: KindSpec("not used", None, None, None, False, True, False),
    K.SCHEDULER_DOWN: KindSpec("seconds, from 1 to 86400", 1, DAY, 60, False, False, False),
    K.MISSED_FIRE: KindSpec("seconds, from 0 to 86400", 0, DAY, 60, False, False, True),
    K.JOB_AUTO_PAUSED: KindSpec("not used", None, None, None, False, False, True),
}


def rule_problems(
    *, kind: str, threshold: float | None, threshold_given: bool, window_sec: int, pool: str, has_job: bool
) -> tuple[dict[str, str], float | None]:
    """The fields that are wrong for `kind` (field name → why) and the threshold to store (the
    kind's default when none was given; None for a kind without one)."""
    spec = SPECS.get(kind)
    if spec is None:
        return {"kind": f"must be one of {', '.join(K.values)}"}, None
    problems: dict[str, str] = {}
    if spec.minimum is None:
        threshold = None  # NO_WORKERS, JOB_AUTO_PAUSED: any threshold given is ignored, as documented
    elif threshold is None or not threshold_given:
        if spec.default is None:
            problems["threshold"] = f"is required for {kind}: {spec.threshold}"
        threshold = spec.default
    else:
        assert spec.maximum is not None
        over = threshold >= spec.maximum if spec.below_maximum else threshold > spec.maximum
        if threshold < spec.minimum or over:
            problems["threshold"] = f"for {kind} is {spec.threshold}"
    if not WINDOW_MIN_SECONDS <= window_sec <= WINDOW_MAX_SECONDS:
        problems["windowSec"] = f"must be from {WINDOW_MIN_SECONDS} to {WINDOW_MAX_SECONDS} seconds"
    if pool and not spec.pool:
        problems["pool"] = (
            f"{kind} is about a job, not a pool"
            if spec.job
            else f"{kind} is about the dispatcher and the sweeper, not a pool"
        )
    if has_job and not spec.job:
        problems["jobId"] = f"{kind} is about the fleet, not a job"
    return problems, threshold

"""The overlap policy BUFFER_ONE as pure rules: what a recurring job's fire does when it is claimed
while an earlier run of the job is still in progress, and when a fire that waited may start. No
database; the dispatcher applies them to a plain job's fires (dispatcher/dispatcher.py) and to a
workflow job's runs (scheduling/runs.py). docs/misfire.md states the rules.

ALLOW, FORBID and REPLACE are decided where they are applied: each is one line there.
"""

from enum import StrEnum


class Verdict(StrEnum):
    RUN = "RUN"  # nothing is in progress and nothing waits: it runs now
    BUFFER = "BUFFER"  # a run is in progress and nothing waits: it waits (BLOCKED) for that run's end
    SKIP = "SKIP"  # a fire already waits: this one is skipped (cancelled), as FORBID's are


BUFFERED_REASON = "buffered: it starts when the run in progress ends (concurrencyPolicy BUFFER_ONE)"
SKIPPED_REASON = "skipped: a fire is already buffered behind the run in progress (concurrencyPolicy BUFFER_ONE)"


def buffer_one(*, running: bool, buffered: bool) -> Verdict:
    """A claimed fire under BUFFER_ONE, given whether a run of the job is in progress and whether
    a fire already waits. A fire that waits while nothing runs is about to start (`releases`): a
    new fire then waits behind it rather than overtaking it, and is skipped as a second waiter."""
    if buffered:
        return Verdict.SKIP
    return Verdict.BUFFER if running else Verdict.RUN


def buffer_one_all(*, running: bool, buffered: bool, fires: int) -> list[Verdict]:
    """`buffer_one` for `fires` fires of one job claimed together, oldest first: the first that
    runs makes the job busy for the ones after it, and the first that waits fills the buffer."""
    verdicts = []
    for _ in range(fires):
        verdict = buffer_one(running=running, buffered=buffered)
        running = running or verdict == Verdict.RUN
        buffered = buffered or verdict == Verdict.BUFFER
        verdicts.append(verdict)
    return verdicts


def releases(*, running: bool, buffered: bool) -> bool:
    """Whether a waiting fire starts now: it waits and nothing of the job is in progress any more
    (the run it waited for ended, however: success, DEAD, cancelled)."""
    return buffered and not running

"""jobs.overlap: concurrencyPolicy BUFFER_ONE as pure rules (no database), against an oracle. The
dispatcher's use of them is dispatcher/tests/test_buffer_one.py's; real processes,
tests_e2e/test_e2e_buffer_one.py's."""

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import overlap
from jobs.overlap import Verdict


def test_the_three_verdicts():
    assert overlap.buffer_one(running=False, buffered=False) == Verdict.RUN
    assert overlap.buffer_one(running=True, buffered=False) == Verdict.BUFFER
    assert overlap.buffer_one(running=True, buffered=True) == Verdict.SKIP
    # A fire that waits while nothing runs is about to start: a new one queues behind it, and
    # the queue holds one.
    assert overlap.buffer_one(running=False, buffered=True) == Verdict.SKIP
    assert overlap.releases(running=False, buffered=True)
    assert not overlap.releases(running=True, buffered=True) and not overlap.releases(running=False, buffered=False)


def test_fires_claimed_together_take_turns():
    assert overlap.buffer_one_all(running=False, buffered=False, fires=3) == [Verdict.RUN, Verdict.BUFFER, Verdict.SKIP]
    assert overlap.buffer_one_all(running=True, buffered=False, fires=2) == [Verdict.BUFFER, Verdict.SKIP]


# A timeline: each step is a fire (it is claimed), or the end of the run in progress, or a
# dispatcher pass (it starts a waiting fire whose run ended). Run by the rules, and by the oracle.
FIRE, END, PASS = "fire", "end", "pass"


def by_the_rules(timeline: list[str]) -> tuple[list[str], int]:
    """What each fire became and the most runs at once, applying jobs.overlap as the dispatcher
    does: a fire's verdict when claimed; a waiting fire started at a pass after its run ended."""
    running, buffered, outcome, most = 0, False, [], 0
    for event in timeline:
        if event == FIRE:
            verdict = overlap.buffer_one(running=running > 0, buffered=buffered)
            outcome.append(verdict.value)
            running += verdict == Verdict.RUN
            buffered = buffered or verdict == Verdict.BUFFER
        elif event == END:
            running = max(running - 1, 0)
        elif overlap.releases(running=running > 0, buffered=buffered):
            running, buffered = running + 1, False
        most = max(most, running)
    return outcome, most


def oracle(timeline: list[str]) -> tuple[list[str], int]:
    """Temporal's BUFFER_ONE as a queue of capacity one in front of a single runner, written out
    by hand: a fire starts if the runner is idle and the queue empty, else joins the queue if it
    is empty, else is dropped; the queued fire starts at the first pass after the runner is idle."""
    runner_busy = False
    queue: list[int] = []
    outcome: list[str] = []
    for event in timeline:
        if event == FIRE:
            index = len(outcome)
            if not runner_busy and not queue:
                runner_busy = True
                outcome.append("RUN")
            elif len(queue) < 1:
                queue.append(index)
                outcome.append("BUFFER")
            else:
                outcome.append("SKIP")
        elif event == END:
            runner_busy = False
        elif not runner_busy and queue:
            queue.pop()
            runner_busy = True
    return outcome, 1 if "RUN" in outcome else 0


@settings(max_examples=500, deadline=None, database=None)
@given(timeline=st.lists(st.sampled_from([FIRE, END, PASS]), max_size=60))
def test_buffer_one_agrees_with_a_queue_of_one(timeline):
    """Every fire runs, waits or is skipped as a one-place queue in front of one runner says;
    never two runs at once; never more than one waiting."""
    outcome, most = by_the_rules(timeline)
    expected, _ = oracle(timeline)
    assert outcome == expected
    assert most <= 1


@settings(max_examples=300, deadline=None, database=None)
@given(
    running=st.booleans(),
    buffered=st.booleans(),
    fires=st.integers(0, 8),
)
def test_a_batch_runs_at_most_one_and_buffers_at_most_one(running, buffered, fires):
    verdicts = overlap.buffer_one_all(running=running, buffered=buffered, fires=fires)
    assert len(verdicts) == fires
    assert verdicts.count(Verdict.RUN) <= (0 if running or buffered else 1)
    assert verdicts.count(Verdict.BUFFER) <= (0 if buffered else 1)
    assert verdicts[: verdicts.count(Verdict.RUN)] == [Verdict.RUN] * verdicts.count(Verdict.RUN)

"""A group action of the dead letter (readmodels/dead_letter.py group_act) is one pass over the
executions that were in the group when it began: each tried at most once, however fast a
re-driven one fails again, and a pass continued by its cursor ends (issue 31, item 1)."""

import itertools
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S
from readmodels import dead_letter
from scheduling.execution_changes import executions_discard

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(make_job, drive, tenant):
    """group(n): n new jobs' executions, DEAD with the same error; returns them and the fingerprint."""

    def make(n: int) -> tuple[list[Execution], str]:
        dead = [drive(make_job(tenant, name=f"order-{k}", handler="fail").executions.get(), S.DEAD) for k in range(n)]
        return dead, dead[0].error_fingerprint

    return make


def ticking(step: float = 0.01):
    """A clock for group_act that moves `step` seconds each time it is read: time is injected."""
    ticks = itertools.count()
    return lambda: next(ticks) * step


def redrive_and_fail_again(drive, tried: Counter):
    """An act that re-drives each execution of the batch and has it fail at once, DEAD again: a
    handler that keeps failing, on workers faster than the request."""

    def act(batch: list[Execution]) -> tuple[int, int]:
        for execution in batch:
            tried[execution.pk] += 1
            assert transitions.redrive(execution_id=execution.pk, source=S.DEAD, now=timezone.now(), reason="group")
            drive(execution, S.DEAD)
        return len(batch), 0

    return act


def test_a_retry_redrives_each_execution_once_though_it_fails_again_at_once(group, drive, monkeypatch):
    """12 DEAD, batches of 5, and every re-driven execution DEAD again before the next batch is
    read: each is re-driven exactly once, and nothing of the pass remains."""
    dead, key = group(12)
    monkeypatch.setattr(dead_letter, "BATCH", 5)
    tried: Counter = Counter()

    outcome = dead_letter.group_act(
        scope=None, fingerprint=key, act=redrive_and_fail_again(drive, tried), seconds=1.0, clock=ticking()
    )

    assert tried == Counter({e.pk: 1 for e in dead})
    assert (outcome.done, outcome.refused, outcome.remaining) == (12, 0, 0)
    assert outcome.next is None
    assert {e.attempt for e in Execution.objects.filter(pk__in=[e.pk for e in dead])} == {2}


def test_a_pass_continued_by_its_cursor_ends_for_a_group_that_keeps_failing(group, drive, monkeypatch):
    """One batch of 2 per request (a budget of 0 s): "continue while remaining > 0" takes three
    requests for a group of 5 that keeps failing, and tries each execution once."""
    dead, key = group(5)
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    tried: Counter = Counter()
    act = redrive_and_fail_again(drive, tried)

    answers = [dead_letter.group_act(scope=None, fingerprint=key, act=act, seconds=0.0)]
    while answers[-1].remaining and len(answers) < 10:
        # Through its text, as a client carries it.
        resume = dead_letter.Pass.of_token(answers[-1].next.token())
        assert resume == answers[-1].next
        answers.append(dead_letter.group_act(scope=None, fingerprint=key, act=act, resume=resume, seconds=0.0))

    assert [(a.done, a.remaining) for a in answers] == [(2, 3), (2, 1), (1, 0)]
    assert tried == Counter({e.pk: 1 for e in dead})
    assert dead_letter.group_count(scope=None, fingerprint=key) == 5  # all DEAD again: a new pass would take them


def test_what_joins_the_group_after_the_pass_began_is_not_part_of_it(group, make_job, drive, tenant):
    """The operator discarded the 3 the group held; a 4th failing the same way meanwhile stays DEAD."""
    dead, key = group(3)
    joined: list[Execution] = []

    def discard(batch: list[Execution]) -> tuple[int, int]:
        if not joined:
            joined.append(drive(make_job(tenant, name="late", handler="fail").executions.get(), S.DEAD))
        moved = executions_discard(executions=batch, now=timezone.now(), reason="group")
        return len(moved), len(batch) - len(moved)

    outcome = dead_letter.group_act(scope=None, fingerprint=key, act=discard)

    assert Execution.objects.get(pk=joined[0].pk).state == S.DEAD
    assert {Execution.objects.get(pk=e.pk).state for e in dead} == {S.DISCARDED}
    assert (outcome.done, outcome.remaining, outcome.next) == (3, 0, None)


def test_one_refused_is_not_asked_again_in_the_pass(group, monkeypatch):
    """A refusal leaves the execution DEAD; the pass goes on past it instead of reading it again
    at the head of every batch."""
    dead, key = group(4)
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    asked: Counter = Counter()
    stuck = min(dead, key=lambda e: (e.finished_at, e.pk))  # the oldest: at the head of the group

    def discard_but_one(batch: list[Execution]) -> tuple[int, int]:
        asked.update(e.pk for e in batch)
        others = [e for e in batch if e.pk != stuck.pk]
        moved = executions_discard(executions=others, now=timezone.now(), reason="group")
        return len(moved), len(batch) - len(moved)

    outcome = dead_letter.group_act(scope=None, fingerprint=key, act=discard_but_one, clock=ticking())

    assert asked == Counter({e.pk: 1 for e in dead})
    assert (outcome.done, outcome.refused, outcome.remaining) == (3, 1, 0)
    assert Execution.objects.get(pk=stuck.pk).state == S.DEAD


def test_a_pass_of_an_empty_group_does_nothing():
    outcome = dead_letter.group_act(scope=None, fingerprint="0123456789abcdef", act=lambda batch: (len(batch), 0))
    assert (outcome.done, outcome.refused, outcome.remaining, outcome.next) == (0, 0, 0, None)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "x",
        "1.00000000000000000000000000000000",
        # past the year 5138
        f"1.{'0' * 32}.999999999999999999.{'0' * 32}",
        f"1.{'0' * 32}.2.{'0' * 31}",
        f"1.{'0' * 32}.2.{'0' * 31}A",
        f"\u0663.{'0' * 32}.2.{'0' * 32}",
    ],
)
def test_a_cursor_that_names_no_pass_is_refused(raw):
    with pytest.raises(ValueError):
        dead_letter.Pass.of_token(raw)


def test_a_cursor_past_its_own_end_is_a_pass_with_nothing_ahead(group):
    """Any text of the cursor's form is a pass (the API's schema says the form, and nothing more)."""
    _, key = group(2)
    late = dead_letter.Pass.of_token(f"99999999999999999.{'f' * 32}.1.{'0' * 32}")
    tried: list[Execution] = []

    def act(batch: list[Execution]) -> tuple[int, int]:
        tried.extend(batch)
        return len(batch), 0

    outcome = dead_letter.group_act(scope=None, fingerprint=key, act=act, resume=late)
    assert (outcome.done, outcome.remaining, tried) == (0, 0, [])


def test_a_cursor_keeps_the_pass_to_the_microsecond():
    at = timezone.now().replace(microsecond=123456)
    made = dead_letter.Pass(upto=(at, uuid.uuid4()), after=(at - timedelta(days=400), uuid.uuid4()))
    assert dead_letter.Pass.of_token(made.token()) == made

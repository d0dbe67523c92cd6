"""The soak's audit rules, on made-up histories: each finds what it is there to find, and a
history that the faults explain passes."""

from datetime import UTC, datetime, timedelta

from soak.audit import Effect, Event, Execution, Figures, audit_cron, audit_execution

T0 = datetime(2027, 1, 1, 12, 0, tzinfo=UTC)
W1, W2 = "host:101", "host:202"
SUCCEEDED_ONLY = frozenset({"SUCCEEDED"})


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def history(*moves: tuple) -> list[Event]:
    """Events from (seconds, from, to, attempt, worker[, message]) tuples."""
    return [Event(n, at(m[0]), m[1], m[2], m[3], m[4], *m[5:]) for n, m in enumerate(moves, start=1)]


def ran_once(worker: str = W1) -> list[Event]:
    return history(
        (0, "", "PENDING", 1, ""),
        (1, "PENDING", "QUEUED", 1, ""),
        (2, "QUEUED", "RUNNING", 1, worker),
        (3, "RUNNING", "SUCCEEDED", 1, worker),
    )


def reclaimed_then_ran_on_w2() -> list[Event]:
    return history(
        (0, "", "PENDING", 1, ""),
        (1, "PENDING", "QUEUED", 1, ""),
        (2, "QUEUED", "RUNNING", 1, W1),
        (6, "RUNNING", "FAILED_WORKER_LOST", 1, W1),
        (6, "FAILED_WORKER_LOST", "PENDING", 2, ""),
        (7, "PENDING", "QUEUED", 2, ""),
        (8, "QUEUED", "RUNNING", 2, W2),
        (9, "RUNNING", "SUCCEEDED", 2, W2),
    )


def audited(execution: Execution, *, allowed=SUCCEEDED_ONLY, may_run: bool = True) -> Figures:
    figures = Figures()
    audit_execution(execution, allowed=allowed, may_run=may_run, figures=figures)
    return figures


def succeeded(events, effects, *, attempt=1, worker=W1, result=None) -> Execution:
    result = result if result is not None else {"attempt": attempt, "worker": worker}
    return Execution("e1", "SUCCEEDED", attempt, worker, result, events, effects)


def test_a_run_that_succeeded_with_its_one_effect_passes():
    figures = audited(succeeded(ran_once(), [Effect(at(2.5), 1, W1)]))
    assert figures.violations == []
    assert (figures.effects, figures.duplicate_effects) == (1, 0)


def test_an_execution_left_running_is_reported_lost():
    events = ran_once()[:3]
    figures = audited(Execution("e1", "RUNNING", 1, W1, None, events, []))
    assert any("ended RUNNING, expected SUCCEEDED (lost)" in v for v in figures.violations)


def test_a_second_effect_of_a_reclaimed_run_is_explained():
    """The frozen worker made its effect after the reclaim: a duplicate, explained."""
    effects = [Effect(at(7.5), 1, W1), Effect(at(8.5), 2, W2)]
    figures = audited(succeeded(reclaimed_then_ran_on_w2(), effects, attempt=2, worker=W2))
    assert figures.violations == []
    assert (figures.duplicate_effects, figures.unexplained_effects, figures.reclaims) == (1, 0, 1)


def test_two_effects_without_a_reclaim_are_unexplained():
    effects = [Effect(at(2.5), 1, W1), Effect(at(2.7), 1, W1)]
    figures = audited(succeeded(ran_once(), effects))
    assert figures.unexplained_effects == 1
    assert any("made 2 effects (two deliveries held one lease)" in v for v in figures.violations)


def test_a_stale_success_over_the_new_attempt_is_found():
    """The frozen worker's SUCCEEDED was accepted while attempt 2 ran: the row holds the result of
    attempt 1, and no second QUEUED → RUNNING for the result's worker explains it."""
    events = reclaimed_then_ran_on_w2()
    stale = succeeded(events, [Effect(at(8.5), 1, W1)], attempt=2, worker=W2, result={"attempt": 1, "worker": W1})
    assert any("(a stale write)" in v for v in audited(stale).violations)


def test_a_history_that_skips_a_state_is_found():
    events = history(
        (0, "", "PENDING", 1, ""),
        (2, "QUEUED", "RUNNING", 1, W1),
        (3, "RUNNING", "SUCCEEDED", 1, W1),
    )
    figures = audited(succeeded(events, [Effect(at(2.5), 1, W1)]))
    assert any("moves from QUEUED, the row was in PENDING" in v for v in figures.violations)


def test_completing_twice_is_found():
    events = [
        *ran_once(),
        *history(
            (4, "SUCCEEDED", "PENDING", 2, ""),
            (5, "PENDING", "QUEUED", 2, ""),
            (6, "QUEUED", "RUNNING", 2, W2),
            (7, "RUNNING", "SUCCEEDED", 2, W2),
        ),
    ]
    effects = [Effect(at(2.5), 1, W1), Effect(at(6.5), 2, W2)]
    figures = audited(succeeded(events, effects, attempt=2, worker=W2))
    assert any("completed 2 times" in v for v in figures.violations)
    assert any("after a terminal state" in v for v in figures.violations)


def test_a_failure_recorded_with_another_attempts_error_is_a_stale_write():
    events = history(
        (0, "", "PENDING", 1, ""),
        (1, "PENDING", "QUEUED", 1, ""),
        (2, "QUEUED", "RUNNING", 1, W2),
        (3, "RUNNING", "FAILED", 1, W2, f"SoakFailure: failing on purpose: attempt 1 of {W1}"),
        (3, "FAILED", "PENDING", 2, ""),
    )
    figures = audited(Execution("e1", "PENDING", 2, "", None, events, []), allowed=frozenset({"PENDING"}))
    assert any("with the error of attempt 1 on host:101" in v for v in figures.violations)


def test_a_job_cancelled_before_it_was_due_must_not_have_run():
    events = [*ran_once()[:3], *history((2.5, "RUNNING", "CANCELLED", 1, W1))]
    figures = audited(
        Execution("e1", "CANCELLED", 1, W1, None, events, []), allowed=frozenset({"CANCELLED"}), may_run=False
    )
    assert any("was started 1 time(s) although it was cancelled" in v for v in figures.violations)


def cron_fire(minute: int, state: str = "SUCCEEDED") -> Execution:
    start = 60 * minute
    if state == "CANCELLED":
        events = history((start - 60, "", "PENDING", 1, ""), (start - 1, "PENDING", "CANCELLED", 1, ""))
        effects = []
    else:
        events = history(
            (start - 60, "", "PENDING", 1, ""),
            (start, "PENDING", "QUEUED", 1, ""),
            (start + 0.1, "QUEUED", "RUNNING", 1, W1),
            (start + 0.2, "RUNNING", "SUCCEEDED", 1, W1),
        )
        effects = [Effect(at(start + 0.15), 1, W1)]
    result = {"attempt": 1, "worker": W1} if state == "SUCCEEDED" else None
    worker = W1 if state == "SUCCEEDED" else ""
    return Execution(f"fire{minute}", state, 1, worker, result, events, effects, scheduled_for=at(60 * minute))


def audited_cron(fires: list[Execution], *, cancelled_at: datetime) -> Figures:
    figures = Figures()
    audit_cron(
        job_id="j1",
        schedule="* * * * *",
        timezone="UTC",
        created_at=at(30),
        cancelled_at=cancelled_at,
        fires=fires,
        figures=figures,
    )
    return figures


def test_every_minute_fired_once_up_to_the_cancel_passes():
    fires = [cron_fire(1), cron_fire(2), cron_fire(3), cron_fire(4, "CANCELLED")]
    figures = audited_cron(fires, cancelled_at=at(60 * 3 + 30))
    assert figures.violations == []
    assert (figures.cron_fires, figures.cron_doubled, figures.cron_skipped) == (4, 0, 0)


def test_a_skipped_minute_is_found():
    fires = [cron_fire(1), cron_fire(3), cron_fire(4, "CANCELLED")]
    figures = audited_cron(fires, cancelled_at=at(60 * 3 + 30))
    assert figures.cron_skipped == 1
    assert any("fires skipped: 2027-01-01T12:02:00+00:00" in v for v in figures.violations)


def test_fires_that_stopped_before_the_cancel_are_skipped_ones():
    """The chain stopped at 12:02 although the job was cancelled at 12:05:30: three missing."""
    figures = audited_cron([cron_fire(1), cron_fire(2)], cancelled_at=at(60 * 5 + 30))
    assert figures.cron_skipped == 3


def test_a_doubled_fire_is_found():
    fires = [cron_fire(1), cron_fire(2), cron_fire(2), cron_fire(3, "CANCELLED")]
    figures = audited_cron(fires, cancelled_at=at(60 * 2 + 30))
    assert figures.cron_doubled == 1


def test_an_effect_belongs_to_its_attempts_run_whatever_the_clocks_say():
    """The start event's time is the worker's reading of the database's clock, the effect's the
    database's own: an effect stamped a moment before its run's start is still that run's."""
    figures = audited(succeeded(ran_once(), [Effect(at(1.99), 1, W1)]))
    assert figures.violations == []


def test_an_effect_of_an_attempt_its_worker_never_started_is_found():
    figures = audited(succeeded(ran_once(), [Effect(at(2.5), 1, W1), Effect(at(2.6), 2, W1)]))
    assert any("an effect of attempt 2 on host:101, which never started it" in v for v in figures.violations)

"""Each kind's judgement, pure: what breaches, what does not, and that the summary names the numbers."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from alerts import evaluation
from alerts.evaluation import MIN_FINISHED, DueFire
from store import percentile

NOW = datetime(2027, 3, 14, 3, 0, tzinfo=UTC)


def test_failure_rate_breaches_above_the_threshold_and_names_the_numbers():
    breach = evaluation.failure_rate(
        subject="pool:default", where=" in pool default", finished=50, dead=21, threshold=20, window_sec=300
    )
    assert breach is not None and breach.subject == "pool:default"
    assert breach.summary == ("failure rate 42% (21 of 50 runs ended DEAD) over 5 min in pool default, threshold 20%")


def test_one_failed_run_of_one_does_not_page():
    assert evaluation.failure_rate(subject="all", where="", finished=1, dead=1, threshold=0, window_sec=60) is None


@given(
    finished=st.integers(min_value=0, max_value=10_000),
    dead_share=st.floats(min_value=0, max_value=1),
    threshold=st.floats(min_value=0, max_value=99.99),
)
def test_failure_rate_breaches_exactly_when_enough_runs_ended_and_the_rate_is_over(finished, dead_share, threshold):
    dead = int(finished * dead_share)
    breach = evaluation.failure_rate(
        subject="all", where="", finished=finished, dead=dead, threshold=threshold, window_sec=300
    )
    assert (breach is not None) == (finished >= MIN_FINISHED and 100.0 * dead / finished > threshold)


@given(st.lists(st.floats(min_value=0, max_value=1e7), min_size=1, max_size=300))
def test_the_p99_lies_between_the_smallest_and_largest_lag_and_breaches_only_above_the_threshold(lags):
    p99 = percentile(lags, 0.99)
    assert min(lags) <= p99 <= max(lags)
    assert (
        evaluation.start_lag_p99(subject="all", where="", lags_ms=lags, threshold_ms=max(lags), window_sec=60) is None
    )
    if p99 > 0:
        breach = evaluation.start_lag_p99(subject="all", where="", lags_ms=lags, threshold_ms=p99 / 2, window_sec=60)
        assert breach is not None and f"over {len(lags)} starts" in breach.summary


def test_no_starts_is_no_lag():
    assert evaluation.start_lag_p99(subject="all", where="", lags_ms=[], threshold_ms=1, window_sec=60) is None


def test_dead_letter_breaches_above_the_count_naming_examples():
    assert evaluation.dead_letter(subject="all", where="", count=2, threshold=2, window_sec=60, examples=[]) is None
    breach = evaluation.dead_letter(
        subject="all", where="", count=3, threshold=2, window_sec=60, examples=["charge (1)", "refund (2)"]
    )
    assert breach is not None
    assert breach.summary == "3 executions went DEAD in the last 1 min (threshold 2): charge (1), refund (2)"


def test_no_workers_names_each_pool_without_a_live_worker_and_what_waits():
    breaches = evaluation.no_workers(
        pools=["default", "io", "cpu"], live_workers={"default": 2, "io": 0}, waiting={"io": 7}
    )
    assert [b.subject for b in breaches] == ["pool:cpu", "pool:io"]
    assert "pool io has no live worker; 7 execution(s)" in breaches[1].summary


def test_scheduler_down_when_not_seen_within_the_threshold_or_never():
    assert (
        evaluation.scheduler_down(
            role="dispatcher", last_seen=NOW - timedelta(seconds=30), last_error="", now=NOW, threshold=30
        )
        is None
    )
    late = evaluation.scheduler_down(
        role="dispatcher",
        last_seen=NOW - timedelta(seconds=95),
        last_error="OperationalError: gone",
        now=NOW,
        threshold=30,
    )
    never = evaluation.scheduler_down(role="sweeper", last_seen=None, last_error="", now=NOW, threshold=30)
    assert late is not None and late.subject == "dispatcher"
    assert "for 1 min 35 s" in late.summary and "threshold 30 s" in late.summary
    assert "OperationalError: gone" in late.summary
    assert never is not None and "no sweeper has been seen" in never.summary


def test_missed_fire_names_each_jobs_earliest_fire_past_the_threshold():
    fires = [
        DueFire("j1", "nightly", NOW - timedelta(seconds=120), "PENDING"),
        DueFire("j1", "nightly", NOW - timedelta(seconds=600), "PENDING"),
        DueFire("j2", "hourly", NOW - timedelta(seconds=30), "QUEUED"),
    ]
    breaches = evaluation.missed_fire(fires=fires, now=NOW, threshold=60)
    assert [b.subject for b in breaches] == ["job:j1"]
    assert breaches[0].summary == (
        "cron job 'nightly' (j1) missed its 2027-03-14 02:50:00 UTC fire by 10 min (threshold 1 min); "
        "it is still PENDING, not started"
    )


def test_job_auto_paused_names_each_job_the_system_paused_and_why():
    at = datetime(2031, 1, 1, 9, 30, tzinfo=UTC)
    jobs = [
        evaluation.AutoPaused("j2", "export", "paused after 3 consecutive failed fires", at),
        evaluation.AutoPaused("j1", "sync", "paused after 1 consecutive failed fire", at - timedelta(hours=1)),
    ]

    breaches = evaluation.job_auto_paused(jobs=jobs)

    assert [b.subject for b in breaches] == ["job:j1", "job:j2"]
    assert breaches[1].summary == (
        "job 'export' (j2) was paused after 3 consecutive failed fires (at 2031-01-01 09:30:00 UTC); "
        "it stays PAUSED until resumed"
    )
    assert evaluation.job_auto_paused(jobs=[]) == []

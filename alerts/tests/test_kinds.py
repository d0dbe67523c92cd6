"""A rule's fields for its kind, pure: each kind's threshold unit, range and default."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alerts.kinds import SPECS, rule_problems
from alerts.models import AlertKind


def _check(kind, threshold=None, window_sec=300, pool="", has_job=False):
    return rule_problems(
        kind=kind,
        threshold=threshold,
        threshold_given=threshold is not None,
        window_sec=window_sec,
        pool=pool,
        has_job=has_job,
    )


def test_every_kind_has_a_spec():
    assert set(SPECS) == set(AlertKind.values)


@pytest.mark.parametrize(("kind", "stored"), [("DEAD_LETTER", 0), ("SCHEDULER_DOWN", 60), ("MISSED_FIRE", 60)])
def test_defaults(kind, stored):
    assert _check(kind) == ({}, stored)


def test_no_workers_ignores_a_threshold():
    assert _check("NO_WORKERS", threshold=12) == ({}, None)


def test_job_auto_paused_has_no_threshold_and_is_about_a_job_not_a_pool():
    assert _check("JOB_AUTO_PAUSED", threshold=3) == ({}, None)
    assert _check("JOB_AUTO_PAUSED", has_job=True)[0] == {}
    assert _check("JOB_AUTO_PAUSED", pool="default")[0] == {"pool": "JOB_AUTO_PAUSED is about a job, not a pool"}


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9))
def test_a_failure_rate_threshold_is_a_percentage_below_100(value):
    problems, _ = _check("FAILURE_RATE", threshold=value)
    assert ("threshold" in problems) == (not 0 <= value < 100)


def test_what_narrows_which_kind():
    assert "pool" in _check("SCHEDULER_DOWN", pool="default")[0]
    assert "jobId" in _check("NO_WORKERS", has_job=True)[0]
    assert "jobId" in _check("SCHEDULER_DOWN", threshold=5, has_job=True)[0]
    assert _check("MISSED_FIRE", has_job=True)[0] == {}
    assert "kind" in _check("CPU")[0]
    assert "windowSec" in _check("DEAD_LETTER", window_sec=9)[0]

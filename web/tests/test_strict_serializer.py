"""StrictSerializer's own loop over the fields (jobs/payloads.py) validates as DRF's
Serializer.to_internal_value does: the same values or the same errors, for bodies of any fields
given or left out, good or bad, with the serializers nested in them."""

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from jobs.payloads import StrictSerializer
from web.api.event_serializers import EventInputSerializer
from web.api.job_serializers import JobInputSerializer, validated_job

pytestmark = pytest.mark.django_db


def _drf_way(self, data):
    """StrictSerializer as it was: its unknown-field check, then DRF's own loop."""
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: [self.refused_fields.get(name, "unknown field")] for name in unknown}
            )
    return serializers.Serializer.to_internal_value(self, data)


def _outcome(serializer_class, data, partial):
    try:
        return "valid", serializer_class(partial=partial).run_validation(data)
    except serializers.ValidationError as exc:
        return "invalid", exc.detail


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=100_000),
    st.sampled_from(["", " ", "noop", "default", "ONCE", "CRON", "DELAYED", "EVENT", "HIGH", "LOW", "UTC"]),
    st.sampled_from(["Europe/Paris", "0 0 * * *", "H * * * *", "*/5 * * * *", "2030-01-01T00:00:00Z"]),
    st.sampled_from(["2030-01-01T00:00:00", "SKIP", "FORBID", "EXPONENTIAL", "x\x00y", "order.paid"]),
    st.text(max_size=5),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["pool", "handler", "maxAttempts", "backoff", "jitter", "steps", "name", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)


def _bodies(serializer_class):
    names = [*serializer_class().fields, "unknownField"]
    return st.dictionaries(st.sampled_from(names), VALUES, max_size=len(names))


# A partial validation (an update's) with a serializer that needs no instance for it.
@pytest.mark.parametrize(
    ("serializer_class", "partial"),
    [(JobInputSerializer, False), (EventInputSerializer, False), (EventInputSerializer, True)],
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_body_validates_as_drfs_own_loop_validates_it(serializer_class, partial, data):
    body = data.draw(_bodies(serializer_class))
    ours = _outcome(serializer_class, body, partial)
    with mock.patch.object(StrictSerializer, "to_internal_value", _drf_way):
        theirs = _outcome(serializer_class, body, partial)
    assert ours == theirs


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.fixed_dictionaries({"pool": st.just("default"), "handler": st.just("noop")}),
    extra=st.dictionaries(st.sampled_from(["priority", "timeoutSec", "payload", "misfirePolicy"]), VALUES, max_size=4),
    run_at=st.sampled_from(["2030-01-01T00:00:00Z", "2030-01-01T02:00:00+02:00", "2030-01-01 00:00:00.5-05:30"]),
)
def test_a_good_create_validates_as_drfs_own_loop_validates_it(target, extra, run_at):
    body = {"name": "nightly", "type": "ONCE", "runAt": run_at, "target": target, **extra}
    ours = _outcome(JobInputSerializer, body, False)
    with mock.patch.object(StrictSerializer, "to_internal_value", _drf_way):
        theirs = _outcome(JobInputSerializer, body, False)
    assert ours == theirs


def _batch_outcomes(bodies):
    """Each body validated by validated_job with one memo for the batch, as POST /v1/jobs/bulk does."""
    memo: dict = {}
    outcomes = []
    for body in bodies:
        try:
            outcomes.append(("valid", validated_job(body, memo)))
        except serializers.ValidationError as exc:
            outcomes.append(("invalid", exc.detail))
    return outcomes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_bodies(JobInputSerializer), min_size=1, max_size=6), repeat=st.integers(0, 5))
def test_a_batch_validates_each_body_as_it_alone_validates(bodies, repeat):
    # Bodies that repeat one another's values (the memo's hits), good and bad ones mixed.
    bodies = [*bodies, *bodies[:repeat]]
    alone = [_outcome(JobInputSerializer, body, False) for body in bodies]
    assert _batch_outcomes(bodies) == alone


def test_a_batch_s_bodies_share_no_value_they_could_change():
    target = {"pool": "default", "handler": "noop"}
    body = {"name": "a", "type": "ONCE", "runAt": "2030-01-01T00:00:00Z", "target": target, "payload": {"n": 1}}
    first, second = (data for _, data in _batch_outcomes([body, dict(body, name="b")]))
    assert first == dict(second, name="a")
    assert first["target"] is not second["target"] and first["payload"] is not second["payload"]
    assert first["target"] == {"pool": "default", "handler": "noop"}


def test_a_batch_s_memo_is_its_own():
    body = {"name": "a", "type": "ONCE", "runAt": "2030-01-01T00:00:00Z", "target": {"handler": "noop"}}
    memo: dict = {}
    validated_job(body, memo)
    assert memo  # the batch's values, kept for its other bodies
    assert JobInputSerializer.batch_memo is None  # a single create validates alone
    # and the next batch, or a single create, starts from nothing
    with pytest.raises(serializers.ValidationError):
        validated_job({**body, "target": {"handler": "no such handler"}})

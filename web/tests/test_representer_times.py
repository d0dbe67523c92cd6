"""The job representer's times (web/rest.py): the same text DRF's DateTimeField writes, without
its per-value lookup of the current timezone. Pure: no database."""

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from rest_framework import serializers

from web.rest import _in_utc_iso_8601, _utc_iso_8601, _utc_text, representer

DRF = serializers.DateTimeField()
OFFSETS = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.none() | OFFSETS))
def test_a_time_reads_as_drf_writes_it(value):
    assert _in_utc_iso_8601(value) == DRF.to_representation(value)


def test_only_plain_iso_8601_fields_take_the_short_path():
    class Answer(serializers.Serializer):
        at = serializers.DateTimeField()
        day = serializers.DateTimeField(format="%Y-%m-%d")
        local = serializers.DateTimeField(default_timezone=timezone(timedelta(hours=2)))

    fields = Answer().fields
    assert _utc_iso_8601(fields["at"])
    assert not _utc_iso_8601(fields["day"])
    assert not _utc_iso_8601(fields["local"])

    class Row:
        at = day = local = datetime(2030, 1, 1, 23, 30, tzinfo=UTC)

    assert representer(Answer())(Row()) == Answer(Row()).data


# Repeats, equal instants in other offsets, naive times, a text: each value gets its own text.
SAME_DAY = [
    datetime(2030, 1, 1, tzinfo=UTC),
    datetime(2030, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))),
    datetime(2030, 1, 1),
    datetime(2030, 1, 1, 0, 0, 1, tzinfo=UTC),
    "2030-01-01",
]
ANY_TIME = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.none() | OFFSETS)


@given(st.lists(st.sampled_from(SAME_DAY) | ANY_TIME, max_size=20))
def test_a_fields_remembered_last_time_gives_each_value_its_own_text(values):
    convert = _utc_text()
    assert [convert(value) for value in values] == [_in_utc_iso_8601(value) for value in values]

"""FastJSONRenderer (web/json_output.py) writes the bytes DRF's JSONRenderer writes, for answers of
any JSON a job may hold (floats of every size, text with control characters, U+2028), the times
and ids DRF's encoder spells, and what orjson cannot write at all."""

import datetime
import decimal
import uuid

from django.utils.translation import gettext_lazy
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer

from web.json_output import FastJSONRenderer

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-5, 1e-7, 1.5e-7, 1e16, 1e22, 123456789.125, -0.0, 0.0001]),
    st.text(),
    st.sampled_from(["\u2028", "a\u2029b", "\x00\x1f\x7f", "é 😀", "e-5", ":0.00001"]),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=30,
)


def _both(data, accepted=None, context=None):
    return JSONRenderer().render(data, accepted, context), FastJSONRenderer().render(data, accepted, context)


@settings(max_examples=600, deadline=None)
@given(JSON)
def test_any_json_is_written_as_drf_writes_it(data):
    drf, fast = _both({"jobs": [{"payload": data}]})
    assert fast == drf


def test_what_drf_encodes_its_own_way_is_written_as_drf_writes_it():
    moment = datetime.datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=datetime.UTC)
    for value in [
        moment,
        moment.date(),
        datetime.time(10, 0, 1, 500),
        datetime.timedelta(seconds=90),
        uuid.UUID(int=7),
        decimal.Decimal("1.10"),
        gettext_lazy("lazy text"),
        {1: "an int key"},
        {"a set": {1}},
        2**70,
        (1, 2),
    ]:
        drf, fast = _both({"value": value, "list": [value]})
        assert fast == drf, value


def test_indent_and_empty_answers_are_drf_s():
    assert (
        _both({"a": [1]}, "application/json; indent=4")
        == (JSONRenderer().render({"a": [1]}, "application/json; indent=4"),) * 2
    )
    assert _both(None) == (b"", b"")

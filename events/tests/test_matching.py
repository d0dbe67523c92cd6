"""An event job's filter: equality of JSON values at the payload's top-level keys."""

import pytest

from events.matching import filter_matches, json_equal


@pytest.mark.parametrize("event_filter", [None, {}])
def test_no_filter_matches_every_payload(event_filter):
    assert filter_matches(event_filter, {})
    assert filter_matches(event_filter, {"currency": "EUR"})


def test_every_key_of_the_filter_must_be_equal():
    event_filter = {"currency": "EUR", "tier": "gold"}
    assert filter_matches(event_filter, {"currency": "EUR", "tier": "gold", "amount": 10})
    assert not filter_matches(event_filter, {"currency": "EUR", "tier": "silver"})
    assert not filter_matches(event_filter, {"currency": "EUR"})


def test_a_missing_key_never_matches_not_even_null():
    assert not filter_matches({"coupon": None}, {})
    assert filter_matches({"coupon": None}, {"coupon": None})


@pytest.mark.parametrize(
    ("wanted", "given"),
    [
        (1, "1"),
        ("1", 1),
        (True, 1),
        (1, True),
        (False, 0),
        (0, None),
        ("", None),
        ([1], [1, 2]),
        ({"a": 1}, {"a": "1"}),
    ],
)
def test_values_of_another_json_type_differ(wanted, given):
    """Type-sensitive: 1 is not "1", and true is not 1 (though Python says True == 1)."""
    assert not json_equal(wanted, given)
    assert not filter_matches({"k": wanted}, {"k": given})


@pytest.mark.parametrize(
    ("wanted", "given"),
    [(1, 1.0), (True, True), (None, None), ("EUR", "EUR"), ([1, {"a": [2]}], [1.0, {"a": [2]}]), ({}, {})],
)
def test_equal_json_values_match(wanted, given):
    assert json_equal(wanted, given)
    assert filter_matches({"k": wanted}, {"k": given, "other": "anything"})


def test_objects_compare_whole_not_by_containment():
    assert not filter_matches({"customer": {"id": 7}}, {"customer": {"id": 7, "name": "Ada"}})

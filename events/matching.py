"""Which events an event job fires on: its `on` names the event, and its `filter`, a JSON object,
asks for equal values at the same top-level keys of the event's payload. Pure: no database."""

from typing import Any


def filter_matches(event_filter: dict[str, Any] | None, payload: dict[str, Any]) -> bool:
    """True when every key of `event_filter` is in `payload` with a JSON-equal value (`json_equal`).
    A key the payload lacks never matches, even for a filter value of null. An absent or empty
    filter matches every payload."""
    return all(key in payload and json_equal(value, payload[key]) for key, value in (event_filter or {}).items())


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it, not Python: 1 and "1" differ, and so do true and 1 (Python's
    True == 1); 1 and 1.0 are the same number; objects and arrays are equal member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) or isinstance(b, int | float):
        return isinstance(a, int | float) and isinstance(b, int | float) and a == b
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(json_equal(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and a == b

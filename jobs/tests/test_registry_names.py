"""A handler's name is one app's: a second app registering it is refused at start, since
whichever loaded last would silently run in its place."""

import pytest

from jobs import registry


def _first(ctx):
    return 1


def _second(ctx):
    return 2


def test_a_name_taken_by_other_code_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_handlers", {})
    registry.register("myco.greet")(_first)
    with pytest.raises(ValueError, match=r"handler 'myco.greet' is registered twice: by .*_first and .*_second"):
        registry.register("myco.greet")(_second)
    assert registry.get("myco.greet").func is _first


def test_the_same_function_registered_again_is_not_a_conflict(monkeypatch):
    """A module imported twice (autodiscovery after an explicit import) registers the same code."""
    monkeypatch.setattr(registry, "_handlers", {})
    registry.register("myco.greet")(_first)
    registry.register("myco.greet", pool="billing")(_first)
    assert registry.get("myco.greet").pool == "billing"

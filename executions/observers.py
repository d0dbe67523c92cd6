"""Who hears of execution state changes: a small, explicit hook.

The state machine announces each commit's moves here; what listens lives above it (the dashboard's
live feed subscribes in `dashboard/apps.py`), so the state machine imports nothing of theirs.
Listeners run after commit, on the dispatcher's and workers' hot path: each must be cheap and
must never raise.
"""

from collections.abc import Callable
from typing import Any

from django.db import transaction

# (execution id, job id, tenant id, new state) per execution moved.
StateChange = tuple[Any, Any, int, str]
Listener = Callable[[list[StateChange]], None]

_listeners: list[Listener] = []


def subscribe(listener: Listener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def announce(changes: list[StateChange]) -> None:
    """Tell every listener of `changes` once the current transaction commits (at once outside one)."""
    if not changes or not _listeners:
        return
    transaction.on_commit(lambda: _tell(changes))


def _tell(changes: list[StateChange]) -> None:
    for listener in _listeners:
        listener(changes)

"""Reads of events: a caller's (scoped by tenant, as every selector is) and a handler's."""

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from events.models import DebouncedEvent, Event

# The most event ids a debounced run's handler is told of (the last ones; the count is all of them).
DEBOUNCED_IDS = 1000


def event_list(*, scope: list[int] | None) -> QuerySet[Event]:
    """The events a caller may see (tenants.selectors.scope_of), newest first."""
    events = Event.objects.order_by("-received_at")
    return events if scope is None else events.filter(tenant_id__in=scope)


def event_get(*, scope: list[int] | None, event_id: Any) -> Event | None:
    try:
        return event_list(scope=scope).filter(pk=event_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


def event_for_handler(event_id: Any, execution_id: Any = None) -> dict[str, Any] | None:
    """What a handler started by an event is told of it (its context's `event`):
    `{"id", "name", "payload", "receivedAt"}`, the time in ISO 8601 UTC ending in `Z`. None when
    `event_id` is None or the event is gone (pruned after the retention). A debounced run's event
    is the last that folded into it (events/debounce.py), with `"debounced": {"count", "eventIds"}`:
    how many folded, the first included, and the ids of the last DEBOUNCED_IDS of them in the
    order they came."""
    if event_id is None:
        return None
    event = Event.objects.filter(pk=event_id).only("id", "name", "payload", "received_at").first()
    if event is None:
        return None
    told: dict[str, Any] = {
        "id": str(event.pk),
        "name": event.name,
        "payload": event.payload,
        "receivedAt": event.received_at.isoformat().replace("+00:00", "Z"),
    }
    if execution_id is not None:
        folds = DebouncedEvent.objects.filter(execution_id=execution_id)
        if count := folds.count():
            last = folds.order_by("-event__received_at", "-pk").values_list("event_id", flat=True)[:DEBOUNCED_IDS]
            told["debounced"] = {"count": count, "eventIds": [str(pk) for pk in reversed(last)]}
    return told

"""Handlers by name, and the pools they run in.

A request names a handler; it never names code to import. Apps register handlers in a
`handlers.py` module, found at startup like `admin.py`.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.module_loading import autodiscover_modules


@dataclass(frozen=True)
class HandlerSpec:
    name: str
    func: Callable[..., Any]
    pool: str
    # Run the handler inside the transaction that records SUCCEEDED, so its own database
    # writes commit with the outcome or not at all.
    atomic: bool = False
    # A DRF serializer class the payload must fit, checked when a job is submitted or changed,
    # so a malformed payload is a 400 rather than a run that fails its every attempt. None: any
    # JSON object.
    payload: type | None = None
    # A named rate limit its runs are held to (pools/rate_limits.py), unless a job's target names
    # another: "" for none.
    rate_limit: str = ""


_handlers: dict[str, HandlerSpec] = {}


def register(
    name: str, *, pool: str = "default", atomic: bool = False, payload: type | None = None, rate_limit: str = ""
) -> Callable:
    """Decorator: `@register("send-invoice", pool="billing", payload=InvoicePayload)`;
    `rate_limit="payments"` holds its runs to that named limit (`manage.py rate_limit set`)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        known = _handlers.get(name)
        if known is not None and _where(known.func) != _where(func):
            # Two apps claiming one name would run whichever loaded last: refuse at start instead.
            raise ValueError(f"handler {name!r} is registered twice: by {_where(known.func)} and {_where(func)}")
        _handlers[name] = HandlerSpec(
            name=name, func=func, pool=pool, atomic=atomic, payload=payload, rate_limit=rate_limit
        )
        return func

    return decorate


def _where(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def get(name: str) -> HandlerSpec | None:
    return _handlers.get(name)


def payload_errors(spec: HandlerSpec, payload: Any) -> Any:
    """What is wrong with `payload` for the handler, in DRF's error shape; None if it fits."""
    if spec.payload is None:
        return None
    serializer = spec.payload(data=payload)
    return None if serializer.is_valid() else serializer.errors


def handler_names() -> list[str]:
    return sorted(_handlers)


def pools() -> list[str]:
    """Configured pools plus every pool a registered handler names."""
    return sorted(set(settings.TICKWORK_POOLS) | {spec.pool for spec in _handlers.values()})


def queue_name(pool: str) -> str:
    return f"tickwork.{pool}"


def autodiscover() -> None:
    autodiscover_modules("handlers")

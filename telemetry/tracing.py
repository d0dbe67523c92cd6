"""OpenTelemetry tracing: off unless the standard OTEL_* variables ask for an exporter.

One trace follows a run of a job from the request that made it to its outcome, across processes.
The trace context travels on the execution row, not in the broker's message: `traceparent` (W3C)
is written when the execution is made inside a traced context (the API's request, a cron fire's
own trace), and the dispatcher and the worker read it back with the rows they already read (the
claim's RETURNING, the start's), so tracing adds no query. Every step of a workflow run carries
its run's context, and a retry keeps its execution's, so a run with all its attempts and steps
is one trace:

    POST /v1/jobs (server)                                   the web role (web.middleware)
    └── tickwork.create_job                                  scheduling.job_creation; its context is stored
        ├── tickwork.dispatch (producer), attempt 1          the dispatcher: claim → publish
        ├── tickwork.run (consumer), attempt 1 → FAILED      the worker: start → outcome
        ├── tickwork.dispatch, attempt 2
        └── tickwork.run, attempt 2 → SUCCEEDED
            └── the handler's own spans (the OpenTelemetry API, current inside the run)

A cron job's later fires are made by a dispatcher; each starts a trace of its own
(`tickwork.fire`, linked to the fire before it): a trace as long as a cron job's life would
be of no use.

Each role calls `setup(role)` once at its start (the ASGI application, the dispatcher's and
sweeper's commands, the Celery worker's main process before its pool forks: the SDK restarts
its export thread in each forked child). With tracing off every hook here returns at its first
line: no span, no SDK loaded, an empty `traceparent` (the column's default) and no query.
"""

import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

logger = logging.getLogger(__name__)

ROLES = ("api", "dispatcher", "worker", "sweeper")
# The tracer of this process once `setup` (or a test, through `use`) turned tracing on; None: off.
_tracer: trace.Tracer | None = None
_PROPAGATOR = TraceContextTextMapPropagator()


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask for traces: OTEL_TRACES_EXPORTER names an exporter
    (not `none`), or an OTLP endpoint is given. OTEL_SDK_DISABLED=true turns it all off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(role: str) -> bool:
    """Turn tracing on for this process if the environment asks for it: a tracer provider whose
    service is OTEL_SERVICE_NAME or `tickwork-<role>`, sampled as OTEL_TRACES_SAMPLER says, that
    exports in batches (OTEL_BSP_*) to the exporters of OTEL_TRACES_EXPORTER (default otlp, as
    OTEL_EXPORTER_OTLP_* configure it). Made the global provider too, so a handler's spans made
    with the OpenTelemetry API join the run's. Returns whether tracing is on. Once per process;
    a configuration that cannot be honoured is logged and leaves tracing off: traces are not
    worth a role that will not start."""
    assert role in ROLES, role
    if _tracer is not None:
        return True
    if not configured():
        return False
    # The SDK only here: a process without tracing never loads it.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    try:
        exporters = [_exporter(name) for name in _exporter_names()]
    except Exception as exc:
        logger.error("tracing is off: OTEL_TRACES_EXPORTER names an exporter that cannot be made: %s", exc)
        return False
    resource = Resource.create({"tickwork.role": role})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: f"tickwork-{role}"}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    use(provider)
    logger.info("tracing on: %s exports to %s", resource.attributes[SERVICE_NAME], ", ".join(_exporter_names()))
    return True


def use(provider: trace.TracerProvider | None) -> None:
    """Trace with `provider` from now on (None: tracing off). `setup` calls it; tests call it
    with a provider that keeps spans in memory."""
    global _tracer
    _tracer = provider.get_tracer("tickwork") if provider is not None else None


def enabled() -> bool:
    return _tracer is not None


def flush(timeout_seconds: float = 5.0) -> None:
    """Export what is buffered: a Celery pool process ends with os._exit, and no atexit runs."""
    if _tracer is None:
        return
    provider = trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(int(timeout_seconds * 1000))


def _exporter_names() -> list[str]:
    """OTEL_TRACES_EXPORTER's exporters by their entry-point names. `otlp` is OTLP/HTTP (the
    exporter this project ships) unless OTEL_EXPORTER_OTLP(_TRACES)_PROTOCOL says grpc, whose
    exporter is another package (opentelemetry-exporter-otlp-proto-grpc, to install)."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    otlp = "otlp_proto_grpc" if (protocol or "").strip().lower() == "grpc" else "otlp_proto_http"
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    return [otlp if name == "otlp" else name for name in names if name and name != "none"] or [otlp]


def _exporter(name: str) -> Any:
    """The span exporter registered under `name` (the SDK's entry points: console, otlp_proto_http,
    and what other installed exporter packages add)."""
    from importlib.metadata import entry_points

    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        raise ValueError(f"no span exporter named '{name}' is installed")
    return found[0].load()()


# --- the trace context on an execution ------------------------------------------------------------


def traceparent() -> str:
    """The current span's context as a W3C traceparent, to store on the executions made now; ""
    when tracing is off or nothing is traced."""
    if _tracer is None:
        return ""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return ""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _context_of(traceparent: str) -> Context:
    """A stored traceparent as a parent context (an empty one, a new trace, for "")."""
    return _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else Context()


def _link_to(traceparent: str) -> list[Link]:
    if not traceparent:
        return []
    context = trace.get_current_span(_context_of(traceparent)).get_span_context()
    return [Link(context)] if context.is_valid else []


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """`tickwork.`-named attributes, without the empty ones; ids as strings."""
    return {
        f"tickwork.{name}": value if isinstance(value, bool | int | float | str) else str(value)
        for name, value in values.items()
        if value is not None and value != ""
    }


# --- spans ------------------------------------------------------------------------------------------


@contextmanager
def span(name: str, attributes: Mapping[str, Any]) -> Iterator[Span | None]:
    """A span of the current trace around a piece of work, current inside it (so executions made
    in it store its context), with `tickwork.`-named `attributes`; None and nothing else when
    tracing is off."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=_attributes(attributes)) as current:
        yield current


def annotate(current: Span | None, attributes: Mapping[str, Any]) -> None:
    """Add attributes learnt during the span (a job's id once made)."""
    if current is not None:
        current.set_attributes(_attributes(attributes))


class _Headers(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...


@contextmanager
def server_span(method: str, headers: _Headers) -> Iterator[Span | None]:
    """The web role's span of one HTTP request, continuing the caller's trace if its request has
    a `traceparent` header (or what OTEL_PROPAGATORS names). Name it with `served` once the route
    is known."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import propagate  # reads OTEL_PROPAGATORS when first imported

    parent = propagate.extract(headers)
    with _tracer.start_as_current_span(
        method, context=parent, kind=SpanKind.SERVER, attributes={"http.request.method": method}
    ) as current:
        yield current


# A Django route's converters (`<str:job_id>`) as OpenTelemetry writes a route's parameters.
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def served(current: Span | None, *, method: str, route: str | None, status: int) -> None:
    """The request's span named by its route (`POST /v1/jobs/{job_id}/trigger`: one name for
    every job's), with its status; a 5xx is an error."""
    if current is None:
        return
    if route is not None:
        route = "/" + _CONVERTER.sub(r"{\1}", route)
        current.update_name(f"{method} {route}")
        current.set_attribute("http.route", route)
    current.set_attribute("http.response.status_code", status)
    if status >= 500:
        current.set_status(Status(StatusCode.ERROR))


@contextmanager
def fire_trace(*, job_id: Any, scheduled_for: Any, previous: str = "") -> Iterator[str]:
    """A new trace for a cron job's next fire, which a dispatcher makes: a `tickwork.fire` span
    (linked to the fire before it, `previous`), current inside, whose traceparent is given to
    store on the fire's executions. "" when tracing is off."""
    if _tracer is None:
        yield ""
        return
    with _tracer.start_as_current_span(
        "tickwork.fire",
        context=Context(),
        links=_link_to(previous),
        attributes=_attributes({"job.id": job_id, "scheduled_for": str(scheduled_for)}),
    ):
        yield traceparent()


def fire_traceparent(*, job_id: Any, scheduled_for: Any, previous: str = "") -> str:
    """fire_trace's context for a fire made with nothing else inside its span (the dispatcher's
    next fires, a thousand a claim in a herd); "" at once when tracing is off."""
    if _tracer is None:
        return ""
    with fire_trace(job_id=job_id, scheduled_for=scheduled_for, previous=previous) as context:
        return context


class Moved(Protocol):
    """What the dispatch and sweep spans read of an execution a move returned (the store's
    `Moved` rows): described here, since this floor imports nothing of the executions above it."""

    @property
    def id(self) -> Any: ...
    @property
    def job_id(self) -> Any: ...
    @property
    def tenant_id(self) -> int: ...
    @property
    def pool(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def lease_token(self) -> int: ...
    @property
    def worker_id(self) -> str: ...
    @property
    def origin(self) -> str: ...
    @property
    def run_id(self) -> Any: ...
    @property
    def traceparent(self) -> str: ...


class Started(Protocol):
    """What the run span reads of a run a worker started (the store's `Started`)."""

    @property
    def id(self) -> Any: ...
    @property
    def job_id(self) -> Any: ...
    @property
    def tenant_slug(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def run_id(self) -> Any: ...
    @property
    def step(self) -> str: ...
    @property
    def traceparent(self) -> str: ...


class Dispatching:
    """The dispatcher's spans of one claim: a `tickwork.dispatch` span per claimed execution
    that has a trace context, a child of it, from the claim's start to its message's publish.
    One span per execution (not one for the batch) because each belongs to another trace; they
    are made only when tracing is on, and cost no query (the claim returns the context). A skipped
    fire's span ends at once; the others end when the publish after commit does."""

    def __init__(self, spans: dict[Any, Span]) -> None:
        self.spans = spans

    def skipped(self, execution_ids: Iterable[Any]) -> None:
        for execution_id in execution_ids:
            if (current := self.spans.pop(execution_id, None)) is not None:
                current.set_attribute("tickwork.dispatch.skipped", True)
                current.end()

    def __enter__(self) -> "Dispatching":
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        for current in self.spans.values():
            if error is not None:
                current.record_exception(error)
                current.set_status(Status(StatusCode.ERROR, f"publish failed: {error}"))
            current.end()
        self.spans = {}


_NOT_DISPATCHING = Dispatching({})


def dispatching(claimed: Iterable[Moved], *, began_ns: int) -> Dispatching:
    """The dispatch spans of the executions just claimed (`began_ns`: when the claim began)."""
    if _tracer is None:
        return _NOT_DISPATCHING
    tracer = _tracer
    return Dispatching(
        {
            m.id: tracer.start_span(
                "tickwork.dispatch",
                context=_context_of(m.traceparent),
                kind=SpanKind.PRODUCER,
                start_time=began_ns,
                attributes=_attributes(
                    {
                        "execution.id": m.id,
                        "job.id": m.job_id,
                        "tenant.id": m.tenant_id,
                        "pool": m.pool,
                        "execution.attempt": m.attempt,
                        "execution.origin": m.origin,
                        "lease_token": m.lease_token,
                        "run.id": m.run_id,
                        "messaging.system": "celery",
                    }
                ),
            )
            for m in claimed
            if m.traceparent
        }
    )


def swept(moved: Iterable[Moved], *, action: str, error: bool) -> None:
    """The sweeper took these executions back (`action`: worker_lost, timed_out, force_cancelled):
    a `tickwork.sweep` span in each one's trace says so, where the attempt's own run span may
    never have ended (its worker died). An error for what the retry policy then resolves."""
    if _tracer is None:
        return
    for m in moved:
        if not m.traceparent:
            continue
        current = _tracer.start_span(
            "tickwork.sweep",
            context=_context_of(m.traceparent),
            attributes=_attributes(
                {
                    "execution.id": m.id,
                    "job.id": m.job_id,
                    "pool": m.pool,
                    "execution.attempt": m.attempt,
                    "run.id": m.run_id,
                    "worker.id": m.worker_id,
                    "sweep.action": action,
                }
            ),
        )
        if error:
            current.set_status(Status(StatusCode.ERROR, action))
        current.end()


def now_ns() -> int:
    """The time a span that is made later began (0 when tracing is off: no clock read)."""
    return time.time_ns() if _tracer is not None else 0


@contextmanager
def run_span(started: Started, *, handler: str) -> Iterator[Span | None]:
    """The worker's `tickwork.run` span of one attempt, a child of the execution's stored context
    (a new trace if it has none), current while the handler runs so that its own spans nest in
    it. Give it the outcome with `outcome`; a handler's exception is recorded by `failed`."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(
        "tickwork.run",
        context=_context_of(started.traceparent),
        kind=SpanKind.CONSUMER,
        attributes=_attributes(
            {
                "execution.id": started.id,
                "job.id": started.job_id,
                "tenant.slug": started.tenant_slug,
                "pool": started.pool,
                "execution.attempt": started.attempt,
                "handler": handler,
                "run.id": started.run_id,
                "step": started.step,
            }
        ),
        # The runner records the outcome (and the handler's exception) itself.
        record_exception=False,
        set_status_on_exception=True,
    ) as current:
        yield current


# How an attempt's outcome reads as a span status: an error for what the retry policy resolves.
_ERRORS = {"FAILED", "TIMED_OUT"}


def outcome(current: Span | None, state: str | None, *, reason: str = "") -> None:
    """The attempt's outcome on its run span: the state it reached (None: this delivery was not
    the lease holder, and recorded nothing); FAILED and TIMED_OUT are errors."""
    if current is None:
        return
    current.set_attribute("tickwork.execution.outcome", str(state) if state is not None else "DROPPED")
    if state in _ERRORS:
        # A handler's exception set it already (`failed`), with what it was.
        status = getattr(current, "status", None)
        if status is None or status.status_code is StatusCode.UNSET:
            current.set_status(Status(StatusCode.ERROR, reason or str(state)))
    elif state == "SUCCEEDED":
        current.set_status(Status(StatusCode.OK))


def failed(error: BaseException) -> None:
    """The handler raised `error`: recorded on the current span (the run's), with its traceback,
    and its status says what it was (the outcome that follows may be a cancel, not a failure)."""
    if _tracer is not None:
        current = trace.get_current_span()
        current.record_exception(error)
        current.set_status(Status(StatusCode.ERROR, f"{error.__class__.__name__}: {error}"))

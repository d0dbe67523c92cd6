"""GET /metrics: Prometheus' text format, for a staff session or `Authorization: Bearer
<TICKWORK_METRICS_TOKEN>` (when that is set), and nobody else.

Every value is read from the store when scraped (readmodels/metrics.py), through a collector of
its own on a registry of its own: no process keeps a counter, so the numbers are the whole
installation's and a replaced worker process changes none of them. docs/metrics.md lists the
metrics, their labels and why their cardinality stays bounded (tenant: at most
TICKWORK_METRICS_MAX_TENANTS values). A rendering is kept for TICKWORK_METRICS_CACHE_SECONDS per
process, so that several scrapers (an HA pair of Prometheus) cost one read.

Not part of the JSON API: a plain Django view, so it is not in the OpenAPI schema."""

import hmac
import threading
import time
from collections.abc import Iterator, Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from executions.clock import db_now
from executions.tallies import Histogram
from readmodels.metrics import Snapshot, metrics_snapshot
from web.audit import audit_failed_authentication

_lock = threading.Lock()
_rendered: tuple[float, bytes] | None = None  # (monotonic time, body)


class TickworkCollector(Collector):
    """The families of one snapshot."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        finished = CounterMetricFamily(
            "tickwork_executions_finished",
            "Executions that reached a terminal state (outcome), by pool and tenant (the top "
            "TICKWORK_METRICS_MAX_TENANTS; the rest as _other).",
            labels=["pool", "tenant", "outcome"],
        )
        for (pool, tenant, outcome), n in sorted(s.finished.items()):
            finished.add_metric([pool, tenant, outcome], n)
        yield finished

        retries = CounterMetricFamily(
            "tickwork_execution_retries", "Attempts beyond the first that the retry policy made.", labels=["pool"]
        )
        for pool, n in sorted(s.retries.items()):
            retries.add_metric([pool], n)
        yield retries

        yield _histogram(
            "tickwork_execution_start_lag_seconds",
            "Start lag (started_at - available_at) of finished executions' last attempt.",
            s.lag,
        )
        yield _histogram(
            "tickwork_execution_run_duration_seconds",
            "Run duration (finished_at - started_at) of finished executions' last attempt.",
            s.duration,
        )

        yield _gauge("tickwork_dead_letter_executions", "Executions in DEAD now (the dead-letter view).", s.dead_letter)
        yield _gauge(
            "tickwork_pool_due_backlog",
            "PENDING executions whose time has come, waiting for a slot (not those a paused job or pool holds).",
            {p.pool: p.due_backlog for p in s.pools},
        )
        yield _gauge(
            "tickwork_pool_paused_due",
            "PENDING executions whose time has come, held by a paused job or a paused pool.",
            {p.pool: p.paused_due for p in s.pools},
        )
        admitted = GaugeMetricFamily(
            "tickwork_pool_admitted",
            "Admitted executions: QUEUED (on the broker, not started) and RUNNING.",
            labels=["pool", "state"],
        )
        for p in s.pools:
            admitted.add_metric([p.pool, "QUEUED"], p.queued)
            admitted.add_metric([p.pool, "RUNNING"], p.running)
        yield admitted
        yield _gauge(
            "tickwork_pool_oldest_due_age_seconds",
            "How long the oldest of the due backlog has waited past its time; 0 when the backlog is empty.",
            {p.pool: max((s.now - p.oldest_due_at).total_seconds(), 0.0) if p.oldest_due_at else 0.0 for p in s.pools},
        )
        yield _gauge("tickwork_pool_workers", "Live workers serving the pool.", {p.pool: p.workers for p in s.pools})
        yield _gauge(
            "tickwork_pool_worker_slots",
            "Slots of the live workers serving the pool (shared between the pools a worker serves).",
            {p.pool: p.slots for p in s.pools},
        )
        yield _gauge(
            "tickwork_pool_busy_slots",
            "Slots running something, as the workers last reported.",
            {p.pool: p.busy for p in s.pools},
        )
        live = GaugeMetricFamily("tickwork_workers_live", "Live worker processes groups (registry).")
        live.add_metric([], s.live_workers)
        yield live

        seen = GaugeMetricFamily(
            "tickwork_role_last_seen_timestamp_seconds",
            "Unix time at which a process of the role last finished a unit of work (absent: never).",
            labels=["role"],
        )
        age = GaugeMetricFamily(
            "tickwork_role_last_seen_age_seconds",
            "Seconds since a process of the role last finished a unit of work, by the database's clock.",
            labels=["role"],
        )
        for role, at in sorted(s.last_seen.items()):
            seen.add_metric([role], at.timestamp())
            age.add_metric([role], max((s.now - at).total_seconds(), 0.0))
        yield seen
        yield age


def _gauge(name: str, documentation: str, values: Mapping[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["pool"])
    for pool, value in sorted(values.items()):
        family.add_metric([pool], value)
    return family


def _histogram(name: str, documentation: str, by_pool: dict[str, Histogram]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=["pool"])
    for pool, h in sorted(by_pool.items()):
        buckets = [(floatToGoString(b), n) for b, n in zip(h.bounds, h.buckets, strict=True)]
        family.add_metric([pool], [*buckets, ("+Inf", h.count)], sum_value=h.total)
    return family


def render() -> bytes:
    """The text exposition of the store now (or of a rendering made within the cache's time)."""
    global _rendered
    with _lock:
        kept = _rendered
        ttl = settings.TICKWORK_METRICS_CACHE_SECONDS
        if kept is not None and time.monotonic() - kept[0] < ttl:
            return kept[1]
        registry = CollectorRegistry()
        snapshot = metrics_snapshot(now=db_now(), max_tenants=settings.TICKWORK_METRICS_MAX_TENANTS)
        registry.register(TickworkCollector(snapshot))
        body = generate_latest(registry)
        _rendered = (time.monotonic(), body)
        return body


def allowed(request: HttpRequest) -> bool:
    """A staff session, or the metrics token (compared in constant time) when one is set."""
    if request.user.is_authenticated and request.user.is_staff:
        return True
    token = settings.TICKWORK_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        if request.user.is_authenticated:
            return HttpResponse("staff only\n", status=403, content_type="text/plain")
        given = "Authorization" in request.headers
        audit_failed_authentication(request, "not the metrics token" if given else "no credentials")
        response = HttpResponse("authentication required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="tickwork-metrics"'
        return response
    response = HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response

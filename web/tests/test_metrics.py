"""GET /metrics: who may read it, what it says, and that it is not part of the JSON API."""

import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from pools import registry
from pools.models import Role

# The start-lag histogram is read as each store spells it (the store's `start_lags`).
pytestmark = pytest.mark.both_stores

TOKEN = "s3cret-metrics-token"

# Every family the exporter writes, as the parser names them (a counter without its _total).
FAMILIES = {
    "tickwork_executions_finished": "counter",
    "tickwork_execution_retries": "counter",
    "tickwork_execution_start_lag_seconds": "histogram",
    "tickwork_execution_run_duration_seconds": "histogram",
    "tickwork_dead_letter_executions": "gauge",
    "tickwork_pool_due_backlog": "gauge",
    "tickwork_pool_paused_due": "gauge",
    "tickwork_pool_admitted": "gauge",
    "tickwork_pool_oldest_due_age_seconds": "gauge",
    "tickwork_pool_workers": "gauge",
    "tickwork_pool_worker_slots": "gauge",
    "tickwork_pool_busy_slots": "gauge",
    "tickwork_workers_live": "gauge",
    "tickwork_role_last_seen_timestamp_seconds": "gauge",
    "tickwork_role_last_seen_age_seconds": "gauge",
}


@pytest.fixture
def metrics_settings(settings):
    settings.TICKWORK_METRICS_TOKEN = TOKEN
    settings.TICKWORK_METRICS_CACHE_SECONDS = 0
    return settings


def parse(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(families: dict, name: str) -> dict:
    """{labels as a sorted tuple of pairs: value} of the samples called `name`."""
    family = families[re.sub(r"_(total|bucket|count|sum)$", "", name)]
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples if s.name == name}


# --- who may read it -----------------------------------------------------------------------------


def test_without_credentials_it_is_refused_and_says_nothing(db, metrics_settings):
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"tickwork_" not in response.content


@pytest.mark.parametrize("header", [f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", TOKEN])
def test_a_wrong_token_is_refused(db, metrics_settings, header):
    response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert b"tickwork_" not in response.content


def test_the_token_is_refused_when_none_is_configured(db, metrics_settings):
    metrics_settings.TICKWORK_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_a_tenants_api_token_is_not_the_metrics_token(db, metrics_settings, api):
    assert api.get("/metrics").status_code == 401


def test_the_right_token_reads_the_metrics(db, metrics_settings):
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert set(FAMILIES) <= set(parse(response.content.decode()))


def test_a_staff_session_reads_them_and_another_session_is_refused(db, metrics_settings, django_user_model):
    staff = django_user_model.objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    someone = django_user_model.objects.create_user("someone", password="pw-someone-12345")
    client = Client()
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200
    client.force_login(someone)
    response = client.get("/metrics")
    assert response.status_code == 403
    assert b"tickwork_" not in response.content


def test_only_get_is_answered(db, metrics_settings):
    assert Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def test_it_is_not_in_the_openapi_schema(db, api):
    schema = api.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert not [path for path in schema["paths"] if "metrics" in path]


# --- what it says ----------------------------------------------------------------------------------


def test_every_family_is_there_with_its_type_and_the_gauges_values(db, metrics_settings, tenant, make_job):
    """An idle installation with one worker, a dispatcher and a due job: the gauges say so."""
    now = timezone.now()
    registry.register(hostname="h", pid=1, pools=["default"], slots=4, now=now)
    Role.objects.create(kind="dispatcher", hostname="h", pid=2, started_at=now, last_seen_at=now)
    make_job(tenant, run_at=now, now=now)

    families = parse(Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())

    assert {name: families[name].type for name in FAMILIES} == FAMILIES
    pool = (("pool", "default"),)
    assert samples(families, "tickwork_pool_due_backlog") == {pool: 1}
    assert samples(families, "tickwork_pool_oldest_due_age_seconds")[pool] >= 0
    assert samples(families, "tickwork_pool_worker_slots") == {pool: 4}
    assert samples(families, "tickwork_pool_busy_slots") == {pool: 0}
    assert samples(families, "tickwork_pool_workers") == {pool: 1}
    assert samples(families, "tickwork_workers_live") == {(): 1}
    assert samples(families, "tickwork_pool_admitted") == {
        (*pool, ("state", "QUEUED")): 0,
        (*pool, ("state", "RUNNING")): 0,
    }
    assert samples(families, "tickwork_execution_retries_total") == {pool: 0}
    assert samples(families, "tickwork_execution_start_lag_seconds_count") == {pool: 0}
    assert samples(families, "tickwork_role_last_seen_timestamp_seconds") == {
        (("role", "dispatcher"),): pytest.approx(now.timestamp())
    }
    assert samples(families, "tickwork_role_last_seen_age_seconds")[(("role", "dispatcher"),)] < 60


def test_a_rendering_is_reused_within_the_cache_time(db, metrics_settings, tenant, make_job):
    metrics_settings.TICKWORK_METRICS_CACHE_SECONDS = 60
    client = Client()
    first = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content
    make_job(tenant, run_at=timezone.now())
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content == first
    metrics_settings.TICKWORK_METRICS_CACHE_SECONDS = 0
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content != first


# --- the Grafana dashboard -------------------------------------------------------------------------


def test_the_grafana_dashboard_queries_only_metrics_the_exporter_writes():
    dashboard = json.loads((Path(django_settings.BASE_DIR) / "docs" / "grafana-tickwork.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    written = set()
    for name, kind in FAMILIES.items():
        written |= {f"{name}_total"} if kind == "counter" else {name}
        if kind == "histogram":
            written |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    for expr in exprs:
        used = set(re.findall(r"\btickwork_[a-z_]+", expr))
        assert used and used <= written, (expr, used - written)

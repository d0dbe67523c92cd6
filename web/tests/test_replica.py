"""The replica's middleware (web/replica.py) without a database: which requests open a read
scope, whose writes are marked, and a request whose replica read failed asked again of the
primary."""

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.http import HttpResponse
from django.test import RequestFactory

from executions.models import Execution
from store.replica import writes
from store.replica.routing import REPLICA, UNKNOWN, ReplicaRouter
from web import replica as middleware_module
from web.replica import ReplicaReadsMiddleware, client_of

router = ReplicaRouter()
factory = RequestFactory()


class _Health:
    def __init__(self, usable=True) -> None:
        self.answer, self.looks = usable, 0

    def usable(self) -> bool:
        return self.answer

    def check(self) -> bool:
        self.looks += 1
        return self.answer


@pytest.fixture
def replica(monkeypatch, settings):
    settings.TICKWORK_REPLICA_WINDOW_SECONDS = 5
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    cache.clear()
    health = _Health()
    monkeypatch.setattr(middleware_module, "replica_health", lambda: health)
    return health


def _as(request, *, tenant_id=None, user_pk=None):
    if tenant_id is not None:
        request.auth = SimpleNamespace(tenant_id=tenant_id)
    request.user = SimpleNamespace(is_authenticated=True, pk=user_pk) if user_pk else AnonymousUser()
    return request


def test_who_a_request_acts_for():
    assert client_of(_as(factory.get("/v1/jobs"), tenant_id=7)) == "tenant:7"
    assert client_of(_as(factory.get("/dashboard/"), user_pk=3)) == "user:3"
    assert client_of(_as(factory.get("/dashboard/"))) == ""
    not_checked = factory.get("/v1/jobs", HTTP_AUTHORIZATION="Bearer abc")
    not_checked.user = AnonymousUser()
    assert client_of(not_checked) is UNKNOWN


def _view(seen, status=200):
    def view(request):
        seen.append(router.db_for_read(Execution))
        return HttpResponse(status=status)

    return view


@pytest.mark.parametrize("path", ["/v1/jobs", "/dashboard/executions/"])
def test_a_get_of_the_api_or_the_dashboard_reads_the_replica(replica, path):
    seen = []
    response = ReplicaReadsMiddleware(_view(seen))(_as(factory.get(path), tenant_id=1))
    assert response.status_code == 200
    assert seen == [REPLICA]


@pytest.mark.parametrize(("method", "path"), [("get", "/admin/"), ("get", "/metrics"), ("post", "/v1/jobs")])
def test_other_requests_read_the_primary(replica, method, path):
    seen = []
    ReplicaReadsMiddleware(_view(seen))(_as(getattr(factory, method)(path), tenant_id=1))
    assert seen[0] in (None, "default")


def test_a_tenants_write_sends_its_reads_not_others_to_the_primary_for_the_window(replica):
    ReplicaReadsMiddleware(_view([], 201))(_as(factory.post("/v1/jobs"), tenant_id=1))
    seen = []
    for tenant_id in (1, 2):
        ReplicaReadsMiddleware(_view(seen))(_as(factory.get("/v1/jobs"), tenant_id=tenant_id))
    assert seen[0] in (None, "default") and seen[1] == REPLICA
    cache.delete(writes._PREFIX + "tenant:1")  # the window is over
    ReplicaReadsMiddleware(_view(seen))(_as(factory.get("/v1/jobs"), tenant_id=1))
    assert seen[2] == REPLICA


def test_a_preflight_is_no_write(replica):
    ReplicaReadsMiddleware(_view([]))(_as(factory.options("/v1/jobs"), tenant_id=1))
    assert not writes.wrote_recently("tenant:1")


def test_a_read_that_failed_on_the_replica_is_asked_of_the_primary_once(replica):
    seen = []

    def view(request):
        seen.append(router.db_for_read(Execution))
        return HttpResponse(status=503 if seen[-1] == REPLICA else 200)

    response = ReplicaReadsMiddleware(view)(_as(factory.get("/v1/jobs"), tenant_id=1))
    assert response.status_code == 200
    assert seen[0] == REPLICA and seen[1] in (None, "default")
    assert replica.looks == 1  # a look at once: is the replica gone, and why


def test_a_503_of_the_primarys_is_not_asked_again(replica):
    replica.answer = False
    calls = []
    response = ReplicaReadsMiddleware(lambda request: calls.append(1) or HttpResponse(status=503))(
        _as(factory.get("/v1/jobs"), tenant_id=1)
    )
    assert response.status_code == 503 and calls == [1] and replica.looks == 0

"""Database connections of the web role through the real server (daphne): a crowd of clients
stays within the process's pool, and a database that is unreachable or full answers 503 with
Retry-After, never 500."""

import http.client
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
from django.db import connection

from scheduler_project.tests.conftest import database_url
from tenants.services import token_create

WEB = "tickwork-web-under-test"


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        client.request("GET", path, headers=headers)
        response = client.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        client.close()


def test_defect6_sixty_concurrent_gets_stay_within_the_web_pool(web_server, tenant, make_job):
    """60 concurrent GET /v1/jobs all answer 200, and the server never holds more connections to
    the database than DATABASE_POOL_MAX_SIZE (it kept one per request thread: 18 → 55)."""
    make_job(tenant)
    _, token = token_create(tenant=tenant)
    # The server's connections are told apart from this process's by their application name.
    server = web_server(DATABASE_POOL_MAX_SIZE="4", DATABASE_URL=f"{database_url()}?application_name={WEB}")
    peak, done = [0], threading.Event()

    def watch() -> None:
        with psycopg.connect(database_url().replace("postgres://", "postgresql://"), autocommit=True) as watcher:
            while not done.is_set():
                (count,) = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                    [connection.settings_dict["NAME"], WEB],
                ).fetchone()
                peak[0] = max(peak[0], count)
                done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(60) as crowd:
            answers = list(
                crowd.map(lambda _: _get(server.port, "/v1/jobs", {"Authorization": f"Bearer {token}"}), range(60))
            )
    finally:
        done.set()
        watcher.join()
    assert [status for status, _, _ in answers] == [200] * 60, server.log()
    assert 1 <= peak[0] <= 4, f"the web role held {peak[0]} connections"


def test_defect6_database_unreachable_answers_503_with_retry_after(web_server):
    """With PostgreSQL unreachable, the API, the dashboard and the admin answer 503 with
    Retry-After (they answered 500)."""
    dead = database_url(PORT="1")  # nothing listens on port 1
    server = web_server(DATABASE_URL=dead, DATABASE_POOL_TIMEOUT="1")
    status, headers, body = _get(server.port, "/v1/jobs", {"Authorization": "Bearer tw_anything"})
    assert status == 503, body
    assert int(headers["retry-after"]) > 0
    assert b"database" in body
    for path in ("/dashboard/", "/admin/"):
        status, headers, _ = _get(server.port, path, {"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"})
        assert status == 503, path
        assert int(headers["retry-after"]) > 0


def test_defect6_database_full_answers_503_with_retry_after(api, monkeypatch):
    """PostgreSQL refusing a connection ("too many clients already"), or no pooled connection
    coming free in time, is a 503 with Retry-After (it was a 500)."""
    from django.db import OperationalError

    from web.api.jobs import JobListCreateApi

    def full(*args, **kwargs):
        raise OperationalError("FATAL: sorry, too many clients already")

    monkeypatch.setattr(JobListCreateApi, "get_queryset", full)
    response = api.get("/v1/jobs")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0

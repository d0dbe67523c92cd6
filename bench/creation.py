"""The http stage: creating jobs through the API, with the web role as the README recommends for
production (its HTTP side: gunicorn with scheduler_project/gunicorn.conf.py, a process per CPU),
against the same server answering `GET /v1/` (no database: the HTTP and framework floor).

- Single: `POST /v1/jobs` from `HTTP_CLIENTS` client processes, each in a loop on a keep-alive
  connection; jobs created per second, and the latency's p50.
- Bulk: `POST /v1/jobs/bulk` with 1,000 jobs a request from `BULK_CLIENTS` clients. Four, not
  two: each keep-alive connection stays with the gunicorn process that accepted it, and two
  clients landed on the same one of the two processes about half the time, leaving a CPU idle
  (the figure swung between ~2,000 and ~3,500 jobs/s from run to run).

The clients are `http.client` loops: they share the machine's CPUs with the server and PostgreSQL,
so the lighter they are the more the figure is the server's (`requests` cost about 1 ms of CPU a
request here, a fifth of what a create costs the server).

Each job is a one-off `noop` due in a day (no dispatcher runs). The tenant has no quotas."""

import contextlib
import socket
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta

from bench.config import log
from bench.processes import wait_for
from bench.results import Figure

HTTP_CLIENTS = 8
BULK_CLIENTS = 4
BULK_SIZE = 1_000
GUNICORN_CONF, WSGI_APP = "scheduler_project/gunicorn.conf.py", "scheduler_project.wsgi"


def _job(i: int, run_at: str) -> dict:
    return {
        "name": f"bench http {i}",
        "type": "ONCE",
        "runAt": run_at,
        "target": {"pool": "default", "handler": "noop"},
    }


def _client(args: tuple) -> tuple[int, list[float], float]:
    """One client: `kind` requests on a keep-alive connection until `seconds` pass; (jobs made, ms
    per request, seconds taken)."""
    import http.client
    import json

    kind, port, token, seconds, index = args
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    run_at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    made, latencies, n = 0, [], 0
    began = time.perf_counter()
    deadline = began + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        if kind == "floor":
            connection.request("GET", "/v1/", headers=headers)
            expected, count = 200, 1
        elif kind == "single":
            connection.request("POST", "/v1/jobs", body=json.dumps(_job(n, run_at)), headers=headers)
            expected, count = 201, 1
        else:
            body = {"jobs": [_job(n * BULK_SIZE + i, run_at) for i in range(BULK_SIZE)]}
            connection.request("POST", "/v1/jobs/bulk", body=json.dumps(body), headers=headers)
            expected, count = 201, BULK_SIZE
        response = connection.getresponse()
        text = response.read()
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status != expected:
            raise RuntimeError(f"{kind} request {n} of client {index}: {response.status} {text[:300]!r}")
        made += count
        n += 1
    return made, latencies, time.perf_counter() - began


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Creation:
    def __init__(self, bench) -> None:
        self.bench, self.db, self.cfg = bench, bench.db, bench.cfg

    def run(self) -> None:
        from tenants.services import tenant_create, token_create

        tenant = tenant_create(slug="bench-http")
        _, token = token_create(tenant=tenant, name="bench")
        # As the README starts it, but on a free port (a fixed one was another benchmark's server,
        # on another database, when two ran at once); its database and settings come from the
        # bench's environment.
        self.port = port = free_port()
        self.bench.procs.start(
            "bench-web",
            [sys.executable, "-m", "gunicorn", "-c", GUNICORN_CONF, "-b", f"127.0.0.1:{port}", WSGI_APP],
        )
        wait_for(lambda: self.up(port), timeout=60, what=f"gunicorn on {port}", interval=0.2, procs=self.bench.procs)
        seconds = 5.0 if self.cfg.quick else 15.0
        floor, _ = self.load("floor", token, HTTP_CLIENTS, seconds)
        with self.measure("POST /v1/jobs", tenant.pk):
            single, single_ms = self.load("single", token, HTTP_CLIENTS, seconds)
        log(
            f"  single POST /v1/jobs: {single:,.0f} jobs/s, p50 {statistics.median(single_ms):.0f} ms;"
            f" GET /v1/ {floor:,.0f}/s"
        )
        self.bench.figures.append(
            Figure("POST /v1/jobs", "/s", single, floor, "GET /v1/ on the same server", "≥ 400/s", single >= 400)
        )
        with self.measure(f"POST /v1/jobs/bulk ({BULK_SIZE:,} a request)", tenant.pk):
            bulk, bulk_ms = self.load("bulk", token, BULK_CLIENTS, seconds)
        log(f"  POST /v1/jobs/bulk: {bulk:,.0f} jobs/s, p50 {statistics.median(bulk_ms):.0f} ms per {BULK_SIZE:,}")
        self.bench.figures.append(
            Figure(
                f"POST /v1/jobs/bulk ({BULK_SIZE:,} a request)",
                "/s",
                bulk,
                single,
                "single POST /v1/jobs",
                "≥ 10,000/s",
                bulk >= 10_000,
            )
        )

    @contextlib.contextmanager
    def measure(self, name: str, tenant: int):
        """What the jobs created meanwhile wrote (bench/cost.py), the web server's statements aside."""
        count = "SELECT count(*) FROM jobs_job WHERE tenant_id = %s"
        made = self.db.scalar(count, [tenant])
        with self.bench.cost.measure(name, others=True) as stage:
            yield
            stage.jobs = self.db.scalar(count, [tenant]) - made

    def up(self, port: int) -> bool:
        import requests

        try:
            return requests.get(f"http://127.0.0.1:{port}/v1/", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def load(self, kind: str, token: str, clients: int, seconds: float) -> tuple[float, list[float]]:
        """`clients` processes on the server for `seconds`: made per second, latencies."""
        log(f"http: {kind}, {clients} clients for {seconds:.0f}s on gunicorn")
        jobs = [(kind, self.port, token, seconds, i) for i in range(clients)]
        with ProcessPoolExecutor(clients) as pool:
            results = list(pool.map(_client, jobs))
        return sum(made / took for made, _, took in results), [ms for _, latencies, _ in results for ms in latencies]

"""The Procrastinate baseline's app (bench/procrastinate_baseline.py): a no-op task on the
database that TICKWORK_BENCH_PROCRASTINATE_URL names, run by Procrastinate's own worker
(`procrastinate --app bench.procrastinate_app.app worker`)."""

import os

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ.get("TICKWORK_BENCH_PROCRASTINATE_URL", "")))


@app.task(name="noop", queue="bench")
async def noop() -> None:
    return None

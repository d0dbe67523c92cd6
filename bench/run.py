#!/usr/bin/env python
"""Tickwork benchmark: dispatch throughput, end-to-end throughput, due → start lag, workflow step
release latency, and the cost of the scheduling statements, each beside a baseline measured in the
same run.

    DATABASE_URL=postgres://postgres@127.0.0.1/postgres CELERY_BROKER_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python bench/run.py                # 1,000,000 future executions
    … bench/run.py --quick                           # a smoke run: small sizes, one round

It creates its own databases (`tickwork_bench` and `tickwork_bench_small`, or --db-name), migrates
and fills them, starts real Celery workers and a real dispatcher, and drops the databases at the
end unless --keep. Baselines and measurements alternate so that the noise of a shared machine
falls on both. bench/README.md says what each figure means.
"""

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.config import (
    BASELINE_QUEUE,
    DEFAULT_BROKER_URL,
    DEFAULT_DATABASE_URL,
    DEFAULT_TRANSPORT_QUEUE,
    QUEUE,
    database_urls,
    log,
    parse_args,
)
from bench.cost import print_costs
from bench.database import Database
from bench.results import print_table
from bench.stages import Bench


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    broker_url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER_URL
    if not broker_url.startswith("redis"):
        sys.exit("CELERY_BROKER_URL must be a Redis URL (redis://host:port/db): the benchmark reads the queues")
    admin_url, url = database_urls(base_url, cfg.db_name)
    _, small_url = database_urls(base_url, f"{cfg.db_name}_small")
    db = Database(admin_url, url, cfg.db_name)
    small = Database(admin_url, small_url, f"{cfg.db_name}_small")
    # Production mode: with REDIS_URL the live views' channel layer is Redis, and every transition
    # sends its notice there (dashboard/live/publisher.py). Without it they would be skipped.
    env = dict(os.environ, DATABASE_URL=url, CELERY_BROKER_URL=broker_url)
    env.setdefault("REDIS_URL", broker_url)
    env.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    env.setdefault("TICKWORK_LOG_LEVEL", "WARNING")
    if cfg.batch:
        env["TICKWORK_DISPATCH_BATCH"] = str(cfg.batch)
    log_dir = Path(tempfile.mkdtemp(prefix="tickwork-bench-"))
    # Each role counts the statements it sends (bench/probe/sitecustomize.py, read by bench/cost.py).
    env["TICKWORK_BENCH_STATEMENTS"] = str(log_dir / "statements")
    (log_dir / "statements").mkdir()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "bench" / "probe"), os.environ.get("PYTHONPATH")]))
    os.environ.update(env)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    bench = Bench(cfg, db, small, broker_url, env, log_dir)
    try:
        log(f"creating {db.name} and {small.name}")
        for each in (db, small):
            each.create()
        call_command("migrate", verbosity=0)
        migrate = [sys.executable, "manage.py", "migrate", "-v", "0"]
        subprocess.run(migrate, cwd=ROOT, env=dict(env, DATABASE_URL=small_url), check=True)
        for each in (db, small):
            each.connect()
        bench.run()
    except BaseException:
        log(f"failed; process logs in {log_dir}")
        raise
    finally:
        bench.procs.stop_all()
        with contextlib.suppress(Exception):
            for queue in (QUEUE, BASELINE_QUEUE, DEFAULT_TRANSPORT_QUEUE):
                bench.purge(queue)
        connections.close_all()
        for each in (db, small):
            if cfg.keep:
                log(f"kept database {each.name}")
            else:
                each.drop()
        if not cfg.keep:
            log("dropped the databases")

    print()
    print(
        f"Tickwork benchmark: {cfg.pending:,} future executions; {cfg.due:,} due per dispatch round; "
        f"{cfg.e2e:,} noop jobs per end-to-end round; lag at {cfg.lag_rate:.0f}/s for {cfg.lag_seconds:.0f}s; "
        f"{cfg.rounds} round(s), medians; workers prefork x {cfg.concurrency}, prefetch {cfg.prefetch}; "
        f"dispatch batch {bench.batch}; live views via {'Redis' if env['REDIS_URL'] else 'nothing'}"
    )
    print()
    print_table(bench.figures)
    if bench.cost.rows:
        print()
        print_costs(bench.cost.rows)
    results = {
        "config": asdict(cfg),
        "batch": bench.batch,
        "live_views_redis": bool(env["REDIS_URL"]),
        "finished": datetime.now(UTC).isoformat(),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "info": bench.info,
        "figures": [dict(asdict(f), ratio=f.ratio) for f in bench.figures],
        "cost": bench.cost.rows,
        "passed": all(f.passed for f in bench.figures),
    }
    Path(cfg.json_path).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nresults written to {cfg.json_path}")
    return 0 if results["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

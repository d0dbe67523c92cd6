#!/usr/bin/env python
"""Tickwork's fault-injection soak: every role as production runs it, a few thousand jobs through
the API, and faults while they run; then an audit of what happened (soak/audit.py).

    .venv/bin/python soak/run.py                 # `make soak`: 8 minutes, 3,000 jobs
    .venv/bin/python soak/run.py --short         # `make soak-short`: a minute, 300 jobs (CI)

Roles (README, "Production deployment"): web (daphne on a free port of 127.0.0.1), two
dispatchers, two sweepers and two Celery prefork workers, on PostgreSQL and Redis, with the short
leases and graces of the end-to-end tests. Faults, spread over the run and each kind at least
once: a worker's process group killed (SIGKILL) and restarted, one of its pool processes killed,
a worker frozen (SIGSTOP) for twice the lease and resumed, a dispatcher and a sweeper killed and
restarted, the broker's database flushed, every connection to the database cut (what a
PostgreSQL restart does to the roles). The soak stops by itself, stops every process it
started (SIGTERM, then SIGKILL, even on failure or Ctrl-C) and drops its database.

Environment: SOAK_POSTGRES_URL (a database on the server to connect to for CREATE and DROP,
default postgres://postgres@127.0.0.1:5432/postgres), SOAK_DB_NAME (created and dropped; must
contain "soak"; default tickwork_soak), SOAK_BROKER_URL (a Redis database of its own, flushed;
default redis://127.0.0.1:6379/12). Exit status: 0 when the audit finds nothing, 1 when it finds
a violation, 2 when the soak itself could not run.
"""

import contextlib
import shutil
import signal
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from soak.campaign import Soak
from soak.config import SoakError, log, parse_args


def main(argv: list[str]) -> int:
    cfg = parse_args(argv)

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    soak = Soak(cfg)
    passed = False
    try:
        log(f"creating database {cfg.db_name}; broker {cfg.broker_url}")
        if soak.pooler is not None:
            log(f"the roles connect through PgBouncer (transaction mode) on port {soak.pooler.port}")
        soak.flush_broker()
        soak.create_database()
        soak.run()
        survivors = soak.roles.stop_all()
        if survivors:
            raise SoakError(f"processes survived SIGTERM and SIGKILL: {survivors}")
        passed = soak.report(soak.audit())
        return 0 if passed else 1
    except SoakError as exc:
        log(f"the soak could not run: {exc}")
        return 2
    except Exception:
        log(f"the soak could not run:\n{traceback.format_exc()}")
        return 2
    finally:
        soak.roles.stop_all()
        if soak.pooler is not None:
            soak.pooler.stop()
        with contextlib.suppress(Exception):
            soak.flush_broker()
        if cfg.keep:
            log(f"kept database {cfg.db_name}")
        else:
            try:
                soak.drop_database()
            except Exception as exc:  # the verdict stands; say what is left behind
                log(f"could not drop {cfg.db_name}: {exc}")
        if passed and not cfg.keep:
            shutil.rmtree(soak.log_dir, ignore_errors=True)
        else:
            log(f"the roles' logs are in {soak.log_dir}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""gunicorn's settings for the web role's HTTP side (README, "Production deployment"):
`gunicorn -c scheduler_project/gunicorn.conf.py scheduler_project.wsgi`. Any of them can be
overridden on the command line or in GUNICORN_CMD_ARGS."""

import os

bind = os.environ.get("TICKWORK_WEB_BIND", "0.0.0.0:8000")
# A process per CPU; each serves requests on a few threads, so a request waiting on PostgreSQL
# does not hold a CPU idle. Keep workers and threads within DATABASE_POOL_MAX_SIZE per process
# (README, "Connections to PostgreSQL"): a thread holds a connection only while it serves.
workers = int(os.environ.get("WEB_CONCURRENCY", str(os.cpu_count() or 1)))
worker_class = "gthread"
threads = int(os.environ.get("TICKWORK_WEB_THREADS", "4"))
keepalive = 30  # seconds a client's idle connection is kept: behind a balancer, longer than its own
timeout = 60
graceful_timeout = 30


def on_starting(server) -> None:
    """Load Django in the master before it forks: an operator's app that fails to load stops
    gunicorn with one line (scheduler_project/app_loading.py) instead of workers that fail to
    boot, one after another. The workers then start from the loaded apps."""
    from scheduler_project.app_loading import setup

    setup()

"""gunicorn's settings for the web role's HTTP side (README, "Production deployment"):
`gunicorn -c scheduler_project/gunicorn.conf.py scheduler_project.wsgi`. Any of them can be
overridden on the command line or in GUNICORN_CMD_ARGS."""

import gc
import os
import re
from pathlib import Path

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
# The control socket (gunicorn's `gunicornc`) defaults to one path per user, $HOME/.gunicorn/gunicorn.ctl,
# and a second gunicorn on the host takes it over from the first. Each instance gets its own in
# TICKWORK_VAR_DIR (a relative one is taken from the checkout, as settings.py takes it), named by
# its address, which no two instances share: e.g. var/gunicorn-0.0.0.0-8000.ctl.
_VAR_DIR = Path(__file__).resolve().parent.parent / os.environ.get("TICKWORK_VAR_DIR", "var")


def when_ready(server) -> None:
    """Name this instance's control socket by its first bound address, unless --control-socket
    named one. Here and not in the settings above: the address may come from the command line
    (-b), which is applied after this file. gunicorn opens the socket after this hook."""
    if server.cfg.control_socket == server.cfg.settings["control_socket"].default:
        address = re.sub(r"[^A-Za-z0-9.]+", "-", server.cfg.bind[0]).strip("-")
        server.cfg.set("control_socket", str(_VAR_DIR / f"gunicorn-{address}.ctl"))


def on_starting(server) -> None:
    """Load Django in the master before it forks: an operator's app that fails to load stops
    gunicorn with one line (scheduler_project/app_loading.py) instead of workers that fail to
    boot, one after another. The workers then start from the loaded apps."""
    from scheduler_project.app_loading import setup

    setup()


def post_worker_init(worker) -> None:
    """What a worker holds once it has loaded the app (Django, the modules, the settings, the URL
    resolver: ~117,000 objects the collector tracks, kept for its life) is left out of the garbage
    collector's passes, as the dispatcher does (dispatcher.ready): each full pass walked them all,
    60 ms of CPU (gc.collect() in a process that loaded the app, median of 7, load 2.8), about
    once every few bulk creates before web/collector.py, and still under single creates."""
    gc.freeze()

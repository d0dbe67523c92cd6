import os

from celery import Celery
from celery.loaders.app import AppLoader
from celery.signals import worker_process_init

from scheduler_project import file_broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
# Celery's Django fixup runs the system checks as a worker starts; a worker skips them, as every
# role does (background/command.py says why).
os.environ.setdefault("CELERY_SKIP_CHECKS", "true")
file_broker.install()  # filesystem:// writes each message whole before a worker can see it


class TickworkLoader(AppLoader):
    def init_worker(self) -> None:
        """Load Django before anything of the worker's, so that an operator's app that fails to
        load stops it with one line (scheduler_project/app_loading.py). Celery's Django fixup
        would load it a moment later in a signal whose receivers' errors Celery only logs: the
        worker would start without the app's handlers and fail every run of them."""
        from scheduler_project.app_loading import setup

        # The apps only: Django's logging is configured by the fixup, after Celery's own, as
        # before (configured first, a handler's logging reached the attempt's log as Celery's
        # redirected output).
        setup(apps_only=True)
        super().init_worker()


app = Celery("tickwork", loader="scheduler_project.celery:TickworkLoader")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _own_connection_pool(**kwargs) -> None:
    """A prefork pool process is forked from the worker's parent. Were the parent to have used the
    database, the child would inherit its connection pool without the threads that serve it and
    with connections the parent still holds: each pool process starts a pool of its own."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    DatabaseWrapper._connection_pools.clear()  # type: ignore[attr-defined]  # private, not in the stubs

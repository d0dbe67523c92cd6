"""Settings for the django-celery-beat baseline (bench/beat.py): the project's, with
django_celery_beat installed and a database of its own, so the product never loads it."""

import os

from scheduler_project.settings import *
from scheduler_project.settings import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat"]
DATABASES["default"]["NAME"] = os.environ["TICKWORK_BENCH_BEAT_DB"]

"""Settings for a django-celery-beat database of a test's own (tests_e2e/test_e2e_import_beat.py):
the project's, with django_celery_beat installed and the database at TICKWORK_BEAT_SOURCE_URL, so
that the product itself never loads django-celery-beat."""

import os

import dj_database_url

from scheduler_project.settings import *  # noqa: F403
from scheduler_project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat"]
DATABASES = {"default": dj_database_url.parse(os.environ["TICKWORK_BEAT_SOURCE_URL"])}

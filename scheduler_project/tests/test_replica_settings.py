"""DATABASES["replica"] from DATABASE_REPLICA_URL (scheduler_project/replica.py)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.replica import replica_database

PRIMARY = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": "tickwork",
    "USER": "tickwork",
    "PASSWORD": "p",
    "HOST": "10.0.0.1",
    "PORT": 5432,
    "CONN_MAX_AGE": 0,
    "OPTIONS": {"prepare_threshold": 5, "options": "-c jit=off", "pool": {"max_size": 6, "timeout": 10.0}},
}


def test_unset_there_is_no_replica():
    assert replica_database("", PRIMARY, window=5, max_lag=3) is None


def test_the_replica_is_the_primarys_settings_at_its_own_address():
    replica = replica_database(
        "postgres://reader:r@10.0.0.2:5433/tickwork?sslmode=require", PRIMARY, window=5, max_lag=3
    )
    assert (replica["HOST"], replica["PORT"], replica["USER"], replica["PASSWORD"]) == ("10.0.0.2", 5433, "reader", "r")
    assert replica["OPTIONS"]["prepare_threshold"] == 5 and replica["OPTIONS"]["options"] == "-c jit=off"
    assert replica["OPTIONS"]["sslmode"] == "require"
    assert replica["OPTIONS"]["application_name"] == "tickwork reads"
    assert replica["OPTIONS"]["pool"] == {
        "max_size": 6,
        "timeout": 1.0,
        "reconnect_timeout": 1.0,
        "name": "tickwork-replica",
    }
    assert replica["CONN_HEALTH_CHECKS"] is True
    assert replica["TEST"] == {"MIRROR": "default"}
    assert PRIMARY["OPTIONS"]["pool"]["timeout"] == 10.0  # the primary's own untouched


def test_the_embedded_default_has_no_replica():
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3", "OPTIONS": {}}
    with pytest.raises(ImproperlyConfigured, match="PostgreSQL"):
        replica_database("postgres://h/db", sqlite, window=5, max_lag=3)


def test_the_window_covers_the_lag_bound_and_a_look():
    with pytest.raises(ImproperlyConfigured, match="at least"):
        replica_database("postgres://h/db", PRIMARY, window=3, max_lag=3)
    assert replica_database("postgres://h/db", PRIMARY, window=4, max_lag=3)

"""The soak's plan: the short version, what CI runs, still has every job kind and every fault."""

import random

import pytest

from soak.config import FAULTS, KINDS, parse_args
from soak.plan import fault_times, plan


def test_the_short_soak_submits_every_kind_and_injects_every_fault_within_its_minute():
    cfg = parse_args(["--short"])
    rng = random.Random(7)

    jobs = plan(cfg, ["token-a", "token-b"], rng)
    faults = fault_times(cfg, rng)

    assert {job.kind for job in jobs} == {*KINDS, "cron"}
    assert len([job for job in jobs if job.kind != "cron"]) == cfg.jobs == 300
    assert all(0 <= job.at <= cfg.seconds for job in jobs)
    assert sorted({kind for _, kind in faults}) == sorted(FAULTS)
    assert all(0 < when < cfg.seconds for when, _ in faults)


def test_the_soak_refuses_a_database_name_it_could_not_safely_drop(monkeypatch, capsys):
    monkeypatch.setenv("SOAK_DB_NAME", "tickwork")
    with pytest.raises(SystemExit):
        parse_args([])
    assert "must contain 'soak'" in capsys.readouterr().err

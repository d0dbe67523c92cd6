"""Who a management command acts as in the audit log (audit.services.cli_actor): the operating
system's user, or, where getpass finds no name (a container's uid with no password entry and no
$USER), the uid, so the row still says who."""

import os

import pytest

from audit.services import Actor, cli_actor


def test_the_operating_systems_user_through_the_command_line(monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "ops-alice")

    assert cli_actor() == Actor(user_id=None, username="ops-alice", source_ip=None, kind="cli")
    assert cli_actor().label == "cli ops-alice"  # how a job's version would name a change made so


@pytest.mark.parametrize("error", [KeyError("getpwuid(): uid not found: 1000680000"), OSError("No username set")])
def test_a_user_without_a_name_is_their_uid(monkeypatch, error):
    def nameless():
        raise error

    monkeypatch.setattr("getpass.getuser", nameless)

    assert cli_actor().username == f"uid {os.getuid()}"

"""`python manage.py jobs …` run as an operator runs it, in a process of its own against the test
database: the table on stdout and nothing on stderr; a missing or unknown tenant or id is one
line on stderr (nothing above it: no usage block, no log line) and a non-zero exit status."""

import os
import subprocess
import sys

import pytest

from testing.harness import ROOT, database_url

pytestmark = pytest.mark.django_db(transaction=True)  # the process reads what the test committed


@pytest.fixture
def manage(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TICKWORK_", "DJANGO_"))}
    env.update(DATABASE_URL=database_url(), TICKWORK_VAR_DIR=str(tmp_path))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    return run


def test_jobs_list_and_its_errors_as_an_operator_sees_them(manage, tenant, make_job):
    job = make_job(tenant, type="CRON", name="nightly report", schedule="30 2 * * *")

    listed = manage("jobs", "list", "--tenant", "acme")
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout.splitlines()[1].startswith(f"{str(job.pk)[:8]}  nightly report  CRON  ACTIVE  30 2 * * * UTC")

    for args, status, line in (
        (["--tenant", "nosuch"], 1, "NotFound: no tenant 'nosuch'"),
        ([], 2, "manage.py jobs list: error: the following arguments are required: --tenant (see --help)"),
    ):
        failed = manage("jobs", "list", *args)
        assert (failed.returncode, failed.stderr, failed.stdout) == (status, f"{line}\n", ""), args
    failed = manage("jobs", "pause", "--tenant", "acme", "00000000")
    assert (failed.returncode, failed.stderr) == (1, "NotFound: no job 00000000 in tenant acme\n")

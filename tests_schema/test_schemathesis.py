"""The API's schema is true: schemathesis, with all its checks, in each of its phases (examples,
coverage, fuzzing, and stateful sequences that follow the schema's links), against the web role
started as production serves HTTP (gunicorn), on PostgreSQL, with a tenant's token and that tenant's
seeded objects (tests_schema/seed.py: jobs of every type, executions in each state, a run, an
event, an alert, a dead-letter group), so that generated requests meet real objects.

It fails on any server error, undocumented status, response that does not match the schema,
schema-valid request refused or schema-invalid request accepted (schemathesis.toml says where a
schema-valid body may still break a rule between fields), and on a phase that did not run."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Enough examples per operation to find what the checks look for, within CI's time.
MAX_EXAMPLES = 10
PHASES = ("examples", "coverage", "fuzzing", "stateful")
# The stateful phase follows the schema's links from lists and creates to the objects they name:
# fewer than this many followed means it ran over nothing (an empty tenant, links that resolve to
# no id). With the fixed seed it follows about 25 of them.
MIN_LINKS_FOLLOWED = 5
# What schemathesis may warn of, and only this: the token is a tenant's, so the staff-only pools'
# actions are 403 and an unsigned webhook 401 (schemathesis.toml); an update's body is checked
# against the stored job, which generated bodies mostly do not fit (web/job_schema.py). Another
# operation whose valid bodies are all refused is a schema that says less than the API checks.
# A job's cancel, pause and resume take no body at all: what is refused there is the If-Match the
# generator makes up, which names a version the job is not at (a 412, as documented). A backfill's
# range must lie in the past, `from` before `to`, and hold at most 10,000 of the job's fires
# (schemathesis.toml): random date-times mostly do not (a 400 naming `to`, as documented).
# (Which operations stateful testing happened not to reach is schemathesis's advice, not a verdict.)
UNJUDGED_WARNINGS = {"missing_test_data"}
EXPECTED_WARNINGS = {
    "missing_auth": {
        "POST /v1/hooks/{tenant}/{event_name}",
        "POST /v1/pools/{pool}/pause",
        "POST /v1/pools/{pool}/resume",
    },
    "validation_mismatch": {
        "PUT /v1/jobs/{job_id}",
        "PATCH /v1/jobs/{job_id}",
        "DELETE /v1/jobs/{job_id}",
        "POST /v1/jobs/{job_id}/pause",
        "POST /v1/jobs/{job_id}/resume",
        "POST /v1/jobs/{job_id}/backfill",
    },
}


def _seed() -> list[str]:
    """A fixed seed, so that CI's verdict on a commit does not change from run to run;
    TICKWORK_SCHEMATHESIS_SEED=random explores afresh (or names another seed)."""
    seed = os.environ.get("TICKWORK_SCHEMATHESIS_SEED", "20261123")
    return [] if seed == "random" else ["--seed", seed]


@pytest.mark.e2e
def test_schema_truth_schemathesis_finds_nothing(web, token, tmp_path):
    # Every check is on by default; schemathesis.toml turns one off for the operations where the
    # contract says otherwise, which `--checks all` on the command line would override.
    st = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    run = subprocess.run(
        [
            st,
            "--config-file",
            str(REPO / "schemathesis.toml"),
            "run",
            f"{web}/v1/schema",
            "--header",
            f"Authorization: Bearer {token}",
            "--phases",
            ",".join(PHASES),
            "--max-examples",
            str(MAX_EXAMPLES),
            "--workers",
            "2",
            "--generation-database",
            "none",
            *_seed(),
            "--no-color",
            "--output-sanitize",
            "false",
            "--report",
            "json",
            "--report-json-path",
            str(tmp_path / "report.json"),
        ],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SCHEMATHESIS_HOOKS": "tests_schema.hooks",
            "TICKWORK_SCHEMATHESIS_TENANT": "acme",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    server_log = (tmp_path / "web.log").read_text(errors="replace")
    said = f"{run.stdout}\n{run.stderr}\n--- web role ---\n{server_log[-5000:]}"
    assert run.returncode == 0, said
    report = json.loads((tmp_path / "report.json").read_text())
    assert {name: phase["status"] for name, phase in report["phases"].items()} == dict.fromkeys(PHASES, "success"), said
    links = re.search(r"API Links:\s+(\d+) covered", run.stdout)
    assert links and int(links.group(1)) >= MIN_LINKS_FOLLOWED, said
    unexpected = {
        kind: set(labels) - EXPECTED_WARNINGS.get(kind, set())
        for kind, labels in report["warnings"].items()
        if kind not in UNJUDGED_WARNINGS
    }
    assert not any(unexpected.values()), f"{unexpected}\n{said}"

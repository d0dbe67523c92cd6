"""Every search box of the dashboard finds by an id in each form its pages show one (issue 31,
item 10): the whole id with or without its dashes, in any case, or its first 8 characters or more
(the lists' short ids), dashes where they fall. The boxes: Jobs (`q`), Executions and the dead
letter (`q`), the Audit log (`target`). The short id found nothing on Executions, and a whole id
without dashes nothing among the audit's execution rows. An id prefix is a range of ids: the
tests give jobs ids that share a prefix to check its bounds."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S

FIRST = uuid.UUID("abcdef01-0000-4000-8000-000000000001")
SECOND = uuid.UUID("abcdef01-ffff-4fff-bfff-ffffffffffff")  # the same 8 first characters
THIRD = uuid.UUID("abcdef02-0000-4000-8000-000000000000")

# An id is a uuid on PostgreSQL and 32 hex characters on SQLite: a prefix is a range of either.
pytestmark = pytest.mark.both_stores


def test_the_id_forms_the_pages_show():
    from web.id_search import IdSpan, id_span

    whole = IdSpan(FIRST, FIRST)
    for form in (str(FIRST), str(FIRST).upper(), FIRST.hex, f"  {FIRST}  ", "{" + str(FIRST) + "}"):
        assert id_span(form) == whole, form
    low, high = uuid.UUID("abcdef01-0000-0000-0000-000000000000"), uuid.UUID("abcdef01-ffff-ffff-ffff-ffffffffffff")
    for form in ("abcdef01", "ABCDEF01", "abcdef01-"):
        assert id_span(form) == IdSpan(low, high), form
    assert (
        id_span("abcdef01-ff")
        == id_span("abcdef01ff")
        == IdSpan(uuid.UUID("abcdef01-ff00-0000-0000-000000000000"), uuid.UUID("abcdef01-ffff-ffff-ffff-ffffffffffff"))
    )
    # Not ids: too short to tell from a word or a year, not hex, dashes where no id has them.
    for text in ("abcdef0", "2026", "cafe", "nightly-export", "abcd-ef01", "abcdef01-0000-0000-0000-0000000000000"):
        assert id_span(text) is None, text


@pytest.fixture
def named(db, tenant, other_tenant, make_job):
    """Three jobs of acme whose ids share prefixes, each with its first execution; one of globex."""
    jobs = {key: make_job(tenant, name=f"job {key}", id=pk) for key, pk in (("first", FIRST), ("second", SECOND))}
    jobs["third"] = make_job(tenant, name="job third", id=THIRD)
    jobs["theirs"] = make_job(other_tenant, name="job theirs")
    return jobs


def _execution(job) -> Execution:
    return Execution.objects.get(job=job)


def _jobs_found(client, q: str) -> set:
    return {job.name for job, _ in client.get("/dashboard/jobs/", {"q": q}).context["rows"]}


def _executions_found(client, q: str, **more) -> set:
    return {e.pk for e in client.get("/dashboard/executions/", {"q": q, **more}).context["executions"]}


def test_the_jobs_box_finds_a_job_by_each_form_of_its_id(member_client, named):
    assert _jobs_found(member_client, "abcdef01") == {"job first", "job second"}
    assert _jobs_found(member_client, "ABCDEF01-FF") == {"job second"}
    assert _jobs_found(member_client, "abcdef010000") == {"job first"}
    assert _jobs_found(member_client, THIRD.hex.upper()) == {"job third"}
    assert _jobs_found(member_client, str(THIRD)) == {"job third"}
    assert _jobs_found(member_client, str(named["theirs"].pk)[:8]) == set()  # another tenant's
    assert _jobs_found(member_client, "third") == {"job third"}  # a name still


def test_the_executions_box_finds_by_a_short_execution_job_or_run_id(member_client, named, tenant, make_job):
    first, third = _execution(named["first"]), _execution(named["third"])
    assert _executions_found(member_client, str(first.pk)[:8]) == {first.pk}
    assert _executions_found(member_client, first.pk.hex.upper()) == {first.pk}
    # A job's short id, as the jobs list shows it: its history.
    assert _executions_found(member_client, str(THIRD)[:8]) == {third.pk}
    assert _executions_found(member_client, str(THIRD)[:13]) == {third.pk}
    # A prefix two jobs share: both histories.
    assert _executions_found(member_client, "abcdef01") == {first.pk, _execution(named["second"]).pk}
    # The dead letter is the same box with a state.
    assert _executions_found(member_client, str(first.pk)[:8], state=S.DEAD) == set()
    # Another tenant's: nothing.
    assert _executions_found(member_client, str(_execution(named["theirs"]).pk)[:8]) == set()


def test_a_runs_short_id_finds_its_steps(member_client, tenant, make_job):
    steps = [
        {"name": "a", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": []},
        {"name": "b", "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ["a"]},
    ]
    job = make_job(tenant, pool="", handler="", workflow={"steps": steps})
    run_id = Execution.objects.filter(job=job).first().run_id
    assert _executions_found(member_client, str(run_id)[:8]) == set(
        Execution.objects.filter(run_id=run_id).values_list("pk", flat=True)
    )


def test_eight_hex_digits_that_name_no_id_are_searched_as_text(member_client, tenant, make_job):
    execution = make_job(tenant, name="sync", handler="fail").executions.get()
    now = timezone.now()
    transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(seconds=30))
    token = Execution.objects.get(pk=execution.pk).lease_token
    transitions.start(execution_id=execution.pk, lease_token=token, now=now, worker_id="w", lease=timedelta(seconds=30))
    transitions.fail(
        execution_id=execution.pk, lease_token=token, now=now, error="digest deadbeef mismatch", traceback=""
    )
    assert _executions_found(member_client, "deadbeef") == {execution.pk}


def test_the_audit_box_finds_a_targets_rows_by_each_form_of_its_id(member_client, named):
    job, execution = named["third"], _execution(named["first"])
    assert member_client.post(f"/dashboard/jobs/{job.pk}/pause").status_code == 302
    assert member_client.post(f"/dashboard/executions/{execution.pk}/cancel").status_code == 302

    def found(target: str) -> list[tuple[str, str]]:
        entries = member_client.get("/dashboard/audit/", {"target": target}).context["entries"]
        return [(entry.action, entry.target_id) for entry in entries]

    for form in (str(job.pk)[:8], str(job.pk).upper(), job.pk.hex, str(job.pk)[:13]):
        assert found(form) == [("job.pause", str(job.pk))], form
    for form in (str(execution.pk)[:8], execution.pk.hex, str(execution.pk)[:11]):
        assert found(form) == [("execution.cancel", str(execution.pk))], form
    # Every row about a job: its execution's cancel too (the row names the job).
    assert ("execution.cancel", str(execution.pk)) in found("abcdef01")
    assert found(str(named["theirs"].pk)[:8]) == []


def test_a_job_searched_by_id_is_shown_as_its_history(member_client, named):
    """The rows are the job's history in its schedule's order, and the page says so (it said
    "Latest activity first"); the `job` filter of a link takes any form of the id too, and text
    that is no id answers an empty page, not a 500."""
    third = _execution(named["third"])
    html = member_client.get("/dashboard/executions/", {"q": str(THIRD)[:8]}).content.decode()
    assert "This job's executions, newest scheduled first." in html and "Latest activity first" not in html
    assert f'href="/dashboard/jobs/{THIRD}/">{str(THIRD)[:8]}</a>, whose id was searched' in html
    for form in (THIRD.hex, str(THIRD).upper()):
        response = member_client.get("/dashboard/executions/", {"job": form})
        assert response.status_code == 200 and [e.pk for e in response.context["executions"]] == [third.pk]
    response = member_client.get("/dashboard/executions/", {"job": "nope"})
    assert response.status_code == 200 and list(response.context["executions"]) == []

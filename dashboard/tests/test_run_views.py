"""The dashboard's view of workflow runs: the run page (its graph and steps table), a workflow
job's runs on the job page, the run link on a step's execution page, scoping and 404s."""

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from executions.models import Execution
from jobs.models import Job
from scheduling import runs

pytestmark = pytest.mark.django_db

DIAMOND = [("A", []), ("B", ["A"]), ("C", ["A"]), ("D", ["B", "C"])]


def _workflow_job(tenant, steps=DIAMOND, name="diamond") -> Job:
    return Job.objects.create(
        tenant=tenant,
        name=name,
        type="ONCE",
        run_at=timezone.now() + timedelta(hours=1),
        pool="",
        handler="",
        workflow={
            "steps": [
                {"name": step, "target": {"pool": "default", "handler": "noop"}, "payload": {}, "depends_on": ups}
                for step, ups in steps
            ]
        },
    )


def _fire(job, *, at=None):
    now = at or timezone.now()
    fired = runs.fire(job=job, scheduled_for=now, now=now)
    return fired.run_id, {e.step: e for e in fired.executions}


def _node(html: str, step: str) -> str:
    """The opening tag of the graph's node for `step`."""
    match = re.search(rf'<g class="run-node [^"]*" data-step="{step}"[^>]*>', html)
    assert match, f"no node for {step}"
    return match.group(0)


def test_the_run_page_draws_the_diamond_in_three_layers(member_client, tenant, drive):
    """A→B, A→C, B+C→D: nodes in layers 0, 1, 1, 2, coloured by their executions' states (A
    SUCCEEDED, B and C released to PENDING, D still BLOCKED), an edge per dependency, each node
    linked to its execution's page with its name, state and attempt."""
    job = _workflow_job(tenant)
    run_id, steps = _fire(job)
    drive(steps["A"], "SUCCEEDED")

    response = member_client.get(f"/dashboard/runs/{run_id}/")
    html = response.content.decode()

    assert response.status_code == 200
    expected = {"A": ("0", "SUCCEEDED", "green"), "B": ("1", "PENDING", "neutral"), "C": ("1", "PENDING", "neutral")}
    expected["D"] = ("2", "BLOCKED", "neutral")
    for step, (layer, state, tone) in expected.items():
        node = _node(html, step)
        assert f'data-layer="{layer}"' in node and f'data-state="{state}"' in node and f"tone-{tone}" in node
        assert f'href="/dashboard/executions/{steps[step].pk}/"' in html
    for edge in ("A→B", "A→C", "B→D", "C→D"):
        assert f'data-edge="{edge}"' in html
    assert html.count('class="run-edge"') == 4
    assert "SUCCEEDED · attempt 1" in html and "BLOCKED · attempt 1" in html
    assert 'data-run-state="RUNNING"' in html
    assert f'href="/dashboard/jobs/{job.pk}/"' in html
    assert "waits for B, C" in html


def test_the_steps_table_has_a_row_per_step_with_its_times_and_error(member_client, tenant, drive):
    """Step, state, attempt, started, finished, took and the last error; a DEAD step makes the
    run FAILED and cancels what depends on it."""
    job = _workflow_job(tenant, steps=[("extract", []), ("load", ["extract"])])
    run_id, steps = _fire(job)
    drive(steps["extract"], "DEAD")

    html = member_client.get(f"/dashboard/runs/{run_id}/").content.decode()

    table = html[html.index('data-testid="run-steps"') :]
    assert '<tr data-step="extract">' in table and '<tr data-step="load">' in table
    assert "boom" in table
    assert "upstream step &#x27;extract&#x27; ended DEAD" in table
    assert 'data-run-state="FAILED"' in html
    assert f'data-exec="{steps["extract"].pk}"' in table
    assert "tone-red" in _node(html, "extract") and "tone-muted" in _node(html, "load")


def test_an_unknown_run_and_another_tenants_run_answer_404(member_client, staff_client, other_tenant):
    """A member cannot see another tenant's run (404, as for an unknown one); staff can."""
    run_id, _ = _fire(_workflow_job(other_tenant))

    assert member_client.get(f"/dashboard/runs/{uuid.uuid4()}/").status_code == 404
    assert member_client.get(f"/dashboard/runs/{run_id}/").status_code == 404
    assert staff_client.get(f"/dashboard/runs/{run_id}/").status_code == 200


def test_a_run_page_costs_the_same_queries_for_two_steps_or_a_hundred(member_client, tenant):
    """One query for the run and its job, one for its steps' executions: the number of steps
    changes nothing."""
    small, _ = _fire(_workflow_job(tenant, steps=[("a", []), ("b", ["a"])], name="small"))
    fan = [("root", [])] + [(f"s{i}", ["root"]) for i in range(98)] + [("end", [f"s{i}" for i in range(98)])]
    large, _ = _fire(_workflow_job(tenant, steps=fan, name="large"))
    member_client.get(f"/dashboard/runs/{small}/")  # the session's first read is warmed up

    with CaptureQueriesContext(connection) as few:
        assert member_client.get(f"/dashboard/runs/{small}/").status_code == 200
    with CaptureQueriesContext(connection) as many:
        response = member_client.get(f"/dashboard/runs/{large}/")

    assert response.status_code == 200
    assert response.content.decode().count('class="run-node ') == 100
    assert len(many) == len(few)
    # session, user, scope, run + job, steps, the dead-letter badge, the firing alerts' banner, the
    # live cursor, tenants
    assert len(few) <= 9


def test_a_workflow_jobs_page_lists_its_runs_newest_first(member_client, tenant, drive):
    """Run link, state, scheduled time, origin and steps done of all; the definition lists the
    workflow's steps (name, target, what each depends on) instead of a target."""
    job = _workflow_job(tenant, steps=[("a", []), ("b", ["a"])])
    now = timezone.now()
    older, older_steps = _fire(job, at=now - timedelta(minutes=5))
    drive(older_steps["a"], "SUCCEEDED")
    drive(Execution.objects.get(run_id=older, step="b"), "SUCCEEDED")
    newer, _ = _fire(job, at=now)

    html = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()

    table = html[html.index('data-testid="job-runs"') :]
    assert table.index(f"/dashboard/runs/{newer}/") < table.index(f"/dashboard/runs/{older}/")
    rows = re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', table, re.S)
    assert [run for run, _ in rows] == [str(newer), str(older)]
    # No step of it has begun: PENDING, not RUNNING (issue 31, item 3).
    assert 'data-run-state="PENDING"' in rows[0][1] and ">0/2<" in rows[0][1]
    assert 'data-run-state="SUCCEEDED"' in rows[1][1] and ">2/2<" in rows[1][1]
    assert "schedule" in rows[0][1]
    steps = html[html.index('data-testid="workflow-steps"') :]
    assert '<tr data-step="b"><td class="mono">b</td>' in steps and "noop <span" in steps
    assert "<dt>Target</dt>" not in html


def test_a_run_none_of_whose_steps_has_begun_is_pending_on_its_page(member_client, tenant):
    """Issue 31, item 3: a run made for tomorrow is PENDING, not RUNNING, and has no end yet."""
    job = _workflow_job(tenant)
    run_id, _ = _fire(job, at=timezone.now() + timedelta(days=1))

    html = member_client.get(f"/dashboard/runs/{run_id}/").content.decode()

    summary = html[html.index('data-testid="run-state"') :]
    assert 'data-run-state="PENDING"' in summary[:400] and "none has begun" in summary[:400]
    assert 'data-run-state="RUNNING"' not in html


def test_the_job_pages_runs_are_paged_apart_from_its_executions(member_client, tenant, monkeypatch):
    """?runs=2 turns the runs' page; the executions' pager is untouched."""
    monkeypatch.setattr("dashboard.runs.reads.PAGE_SIZE", 2)
    job = _workflow_job(tenant, steps=[("only", [])])
    now = timezone.now()
    made = [_fire(job, at=now + timedelta(minutes=i))[0] for i in range(3)]

    first = member_client.get(f"/dashboard/jobs/{job.pk}/").content.decode()
    second = member_client.get(f"/dashboard/jobs/{job.pk}/?runs=2").content.decode()

    assert f"/dashboard/runs/{made[2]}/" in first and f"/dashboard/runs/{made[0]}/" not in first
    assert "?runs=2" in first
    assert f"/dashboard/runs/{made[0]}/" in second and f"/dashboard/runs/{made[2]}/" not in second


def test_a_plain_jobs_page_has_no_runs_section(member_client, tenant, make_job):
    html = member_client.get(f"/dashboard/jobs/{make_job(tenant).pk}/").content.decode()
    assert 'data-testid="job-runs"' not in html and "<dt>Target</dt>" in html


def test_a_steps_execution_page_links_to_its_run(member_client, tenant, make_job):
    """The execution of a step names its run (linked) and its step; a plain one shows neither."""
    run_id, steps = _fire(_workflow_job(tenant))

    html = member_client.get(f"/dashboard/executions/{steps['D'].pk}/").content.decode()
    plain = member_client.get(f"/dashboard/executions/{make_job(tenant).executions.get().pk}/").content.decode()

    assert f'href="/dashboard/runs/{run_id}/" data-testid="execution-run"' in html
    assert '<span class="mono" data-testid="execution-step">D</span>' in html
    assert 'data-testid="execution-run"' not in plain


def test_the_live_refresh_of_a_run_page_shows_the_new_states(member_client, tenant, drive):
    """What app.js fetches when the feed reports an event of the run (X-Live-Refresh): the region
    comes back with the moved steps' new colours."""
    run_id, steps = _fire(_workflow_job(tenant))
    before = member_client.get(f"/dashboard/runs/{run_id}/").content.decode()
    assert 'data-live-region="run-main" id="run-main" data-live-run="' + str(run_id) + '"' in before
    assert 'data-state="BLOCKED"' in _node(before, "B")

    drive(steps["A"], "SUCCEEDED")
    after = member_client.get(f"/dashboard/runs/{run_id}/", headers={"X-Live-Refresh": "1"}).content.decode()

    assert "tone-green" in _node(after, "A")
    assert 'data-state="PENDING"' in _node(after, "B") and 'data-state="PENDING"' in _node(after, "C")


def test_blocked_steps_are_listed_and_counted_like_every_other_state(member_client, tenant):
    """BLOCKED is one of the executions page's walks and filters and one of the overview's
    counts: a step waiting for its upstream steps is never missing from the lists."""
    _, steps = _fire(_workflow_job(tenant))

    listed = member_client.get("/dashboard/executions/").content.decode()
    blocked = member_client.get("/dashboard/executions/?state=BLOCKED").content.decode()
    overview = member_client.get("/dashboard/").content.decode()

    assert all(f'data-exec="{steps[name].pk}"' in listed for name in "ABCD")
    assert f'data-exec="{steps["D"].pk}"' in blocked and f'data-exec="{steps["A"].pk}"' not in blocked
    assert "<option selected>BLOCKED</option>" in blocked
    count = overview[overview.index('data-testid="count-BLOCKED"') :]
    assert "<strong>3</strong>" in count[: count.index("</a>")]


def test_every_execution_state_has_a_place_on_the_pages():
    from dashboard.selectors import STATE_ORDER
    from executions.states import ExecutionState

    assert set(STATE_ORDER) == set(ExecutionState)

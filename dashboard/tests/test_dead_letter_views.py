"""The dead letter grouped by error fingerprint (dashboard/dead_letter/): groups, a group's
page, and retry or discard of a whole group, audited one row per execution, scoped by tenant."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.models import AuditEntry
from executions import transitions
from executions.fingerprints import fingerprint
from executions.models import Execution
from executions.states import ExecutionState as S
from readmodels import dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def dead_with(make_job):
    """dead_with(tenant, error, name=…): a new job's execution, failed with `error` and DEAD."""

    def make(tenant, error: str, name: str = "job", pool: str = "default") -> Execution:
        now = timezone.now()
        execution = make_job(tenant, name=name, handler="fail", pool=pool).executions.get()
        assert transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(seconds=30))
        token = Execution.objects.get(pk=execution.pk).lease_token
        assert transitions.start(
            execution_id=execution.pk, lease_token=token, now=now, worker_id="w-1", lease=timedelta(seconds=30)
        )
        assert transitions.fail(execution_id=execution.pk, lease_token=token, now=now, error=error, traceback="")
        assert transitions.discard(execution_id=execution.pk, source=S.FAILED, now=now, message="exhausted")
        return Execution.objects.get(pk=execution.pk)

    return make


def test_the_error_is_fingerprinted_in_the_statement_that_records_it(dead_with, tenant):
    """A failure's row carries its error's fingerprint; a re-drive clears both."""
    execution = dead_with(tenant, "KeyError: 'user-17'")
    assert execution.error_fingerprint == fingerprint("KeyError: 'user-99'") != ""
    transitions.redrive(execution_id=execution.pk, source=S.DEAD, now=timezone.now(), reason="again")
    assert Execution.objects.values_list("error", "error_fingerprint").get(pk=execution.pk) == ("", "")


def test_the_dead_letter_groups_by_fingerprint(member_client, dead_with, tenant, other_tenant):
    """Errors that differ in an id share a group; another error is another group; another
    tenant's dead executions are not counted."""
    for n in range(3):
        dead_with(tenant, f"HTTPError: upstream answered 503 for order {1000 + n}", name=f"sync-{n}")
    dead_with(tenant, "KeyError: 'customer'", name="import", pool="billing")
    dead_with(other_tenant, "HTTPError: upstream answered 503 for order 7", name="theirs")

    found = dead_letter.dead_letter_groups(scope=[tenant.pk])
    by_count = sorted((g.count, g.jobs, g.masked) for g in found.groups)
    assert by_count == [
        (1, 1, "KeyError: <str>"),
        (3, 3, "HTTPError: upstream answered <n> for order <n>"),
    ]
    assert found.total == 4
    html = member_client.get("/dashboard/dead-letter/").content.decode()
    assert "HTTPError: upstream answered &lt;n&gt; for order &lt;n&gt;" in html
    assert "Retry all 3" in html and "Discard all 1" in html
    assert "theirs" not in html


def test_retrying_a_group_redrives_each_and_audits_each(member_client, dead_with, tenant):
    """Retry of a group re-drives all its DEAD executions, with one audit row per execution
    sharing a request id; the other group is untouched."""
    group = [dead_with(tenant, f"TimeoutError: after {n} s") for n in (5, 10, 30)]
    other = dead_with(tenant, "ValueError: bad payload")
    key = group[0].error_fingerprint

    response = member_client.post(f"/dashboard/dead-letter/{key}/retry", follow=True)

    assert response.redirect_chain[-1][0] == "/dashboard/dead-letter/"
    assert "Re-driven 3 execution(s)" in response.content.decode()
    assert {Execution.objects.get(pk=e.pk).state for e in group} == {S.PENDING}
    assert Execution.objects.get(pk=other.pk).state == S.DEAD
    entries = list(AuditEntry.objects.filter(action="execution.retry"))
    assert len(entries) == 3 and {e.outcome for e in entries} == {"OK"}
    assert len({e.request_id for e in entries}) == 1


def test_discarding_a_group_takes_it_out_of_the_dead_letter_for_good(member_client, dead_with, tenant):
    """Discard moves the group's executions DEAD → DISCARDED (an event each), audited; they are
    no longer in the dead letter and cannot be re-driven."""
    group = [dead_with(tenant, f"ConnectionError: host db-{n} unreachable") for n in range(2)]
    key = group[0].error_fingerprint

    member_client.post(f"/dashboard/dead-letter/{key}/discard")

    assert {Execution.objects.get(pk=e.pk).state for e in group} == {S.DISCARDED}
    assert dead_letter.dead_letter_groups(scope=[tenant.pk]).groups == []
    assert [e.outcome for e in AuditEntry.objects.filter(action="execution.discard")] == ["OK", "OK"]
    assert group[0].events.latest("id").to_state == S.DISCARDED
    response = member_client.post(f"/dashboard/executions/{group[0].pk}/retry", follow=True)
    assert Execution.objects.get(pk=group[0].pk).state == S.DISCARDED
    assert "DISCARDED" in response.content.decode()


def test_a_large_group_is_worked_through_in_bounded_batches(dead_with, tenant, monkeypatch, staff):
    """A request stops after its time budget and says how many remain; asking again continues."""
    from dashboard.dead_letter.actions import dead_letter_group_act
    from dashboard.services import Actor

    group = [dead_with(tenant, f"OSError: disk {n} full") for n in range(5)]
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    actor = Actor(user_id=staff.pk, username=staff.username)
    key = group[0].error_fingerprint

    first = dead_letter_group_act(actor=actor, scope=None, fingerprint=key, action="discard", now=timezone.now())
    # A budget of 0 s: one batch per request.
    monkeypatch.setattr(dead_letter, "ACTION_SECONDS", 0.0)
    assert (first.done, first.remaining) == (5, 0)
    group = [dead_with(tenant, f"OSError: disk {n} full") for n in range(5)]
    step = dead_letter_group_act(actor=actor, scope=None, fingerprint=key, action="retry", now=timezone.now())
    assert step.remaining == 5 - step.done and step.done == 2


def test_continue_carries_on_the_pass_and_never_redrives_one_twice(member_client, dead_with, tenant, monkeypatch):
    """Issue 31, item 1. A request that does not finish its pass offers Continue, with the pass's
    cursor: it re-drives the rest of those that were in the group when Retry was pressed, not
    one that the first request re-drove and that has failed again since (its handler would run
    twice). A forged cursor is refused, not taken for a new pass."""
    group = [dead_with(tenant, f"OSError: disk {n} full") for n in range(3)]
    key = group[0].error_fingerprint
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    monkeypatch.setattr(dead_letter, "ACTION_SECONDS", 0.0)

    page = member_client.post(f"/dashboard/dead-letter/{key}/retry", follow=True)

    html = page.content.decode()
    assert "2 execution(s)" in html and "1 more remain" in html
    assert 'data-action="group-continue"' in html and "Continue retry: 1 more" in html
    cursor = page.context["continue_cursor"]
    again = next(e for e in group if Execution.objects.get(pk=e.pk).state == S.PENDING)
    now = timezone.now()
    assert transitions.queue_many([again.pk], now=now, publish_grace=timedelta(seconds=30))
    token = Execution.objects.get(pk=again.pk).lease_token
    assert transitions.start(
        execution_id=again.pk, lease_token=token, now=now, worker_id="w-1", lease=timedelta(seconds=30)
    )
    assert transitions.fail(
        execution_id=again.pk, lease_token=token, now=now, error="OSError: disk 9 full", traceback=""
    )
    assert transitions.discard(execution_id=again.pk, source=S.FAILED, now=now, message="exhausted")

    assert member_client.post(f"/dashboard/dead-letter/{key}/retry", {"cursor": "forged"}).status_code == 400
    done = member_client.post(f"/dashboard/dead-letter/{key}/retry", {"cursor": cursor}, follow=True)

    assert Execution.objects.get(pk=again.pk).state == S.DEAD
    assert sorted(Execution.objects.get(pk=e.pk).attempt for e in group) == [2, 2, 2]
    assert done.redirect_chain[-1][0] == "/dashboard/dead-letter/"
    assert "Re-driven 1 execution(s)" in done.content.decode()


def test_another_tenants_group_is_not_acted_on(member_client, dead_with, other_tenant):
    """A member's group action never touches another tenant's executions of the same kind."""
    theirs = dead_with(other_tenant, "KeyError: 'x'")
    member_client.post(f"/dashboard/dead-letter/{theirs.error_fingerprint}/discard")
    assert Execution.objects.get(pk=theirs.pk).state == S.DEAD
    response = member_client.get(f"/dashboard/dead-letter/{theirs.error_fingerprint}/")
    assert response.status_code == 302
    assert member_client.get("/dashboard/dead-letter/not-a-key/").status_code == 404
    assert member_client.post(f"/dashboard/dead-letter/{theirs.error_fingerprint}/explode").status_code == 404


def test_the_group_page_shows_the_error_and_its_executions(member_client, dead_with, tenant):
    execution = dead_with(tenant, "RuntimeError: boom at 2026-11-26T07:30:00Z\nTraceback details", name="nightly")
    html = member_client.get(f"/dashboard/dead-letter/{execution.error_fingerprint}/").content.decode()
    assert "RuntimeError: boom at &lt;time&gt;" in html
    assert "Traceback details" in html and "nightly" in html
    assert str(execution.pk) in html


def test_discarding_keeps_the_metrics_counters(dead_with, tenant):
    """A discarded execution still counts as the DEAD end it had; no DISCARDED end appears."""
    from executions import tallies
    from scheduling.execution_changes import executions_discard

    execution = dead_with(tenant, "KeyError: 'k'")

    def totals():
        table = tallies.tally(Execution.objects.all())
        folded = tallies.folded()
        keys = set(table) | set(folded)
        return {
            k: table.get(k, tallies.Tally()).plus(folded.get(k, tallies.Tally())).finished
            for k in keys
            if table.get(k, tallies.Tally()).plus(folded.get(k, tallies.Tally())).finished
        }

    before = totals()
    executions_discard(executions=[execution], now=timezone.now(), reason="test")
    assert totals() == before

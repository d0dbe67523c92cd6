"""The executions page's one search box (dashboard.pages.execution_page, `q`): an id finds
that execution (or a job's or a run's executions); text finds executions by their job's name or
handler or by their error; other filters still apply; another tenant's rows never show."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.executions import listing as pages
from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S

# The executions list walks newest first as each store spells it (the store's `newest_first`).
pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _search(scope, q: str, **filters) -> set:
    page = pages.execution_page(scope=scope, filters=pages.ExecutionFilters(q=q, **filters), page=1, now=timezone.now())
    return {row.pk for row in page.rows}


def _failed(make_job, tenant, *, name: str, error: str, handler: str = "fail") -> Execution:
    now = timezone.now()
    execution = make_job(tenant, name=name, handler=handler).executions.get()
    transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(seconds=30))
    token = Execution.objects.get(pk=execution.pk).lease_token
    transitions.start(execution_id=execution.pk, lease_token=token, now=now, worker_id="w", lease=timedelta(seconds=30))
    transitions.fail(execution_id=execution.pk, lease_token=token, now=now, error=error, traceback="")
    transitions.discard(execution_id=execution.pk, source=S.FAILED, now=now, message="exhausted")
    return execution


@pytest.fixture
def history(tenant, other_tenant, make_job, drive):
    return {
        "billing": _failed(make_job, tenant, name="nightly-billing-export", error="HTTPError: 503 from ledger"),
        "sync": _failed(make_job, tenant, name="crm-sync", error="KeyError: 'Ledger_ID'"),
        "fine": drive(make_job(tenant, name="report", handler="noop").executions.get(), S.SUCCEEDED),
        "theirs": _failed(make_job, other_tenant, name="nightly-billing-export", error="HTTPError: 503 from ledger"),
    }


def test_an_execution_id_finds_that_execution(history, tenant):
    assert _search([tenant.pk], str(history["sync"].pk)) == {history["sync"].pk}
    assert _search([tenant.pk], str(history["theirs"].pk)) == set()  # another tenant's id: nothing
    assert _search(None, str(history["theirs"].pk)) == {history["theirs"].pk}


def test_a_job_id_finds_its_executions(history, tenant):
    job = history["fine"].job
    assert _search([tenant.pk], str(job.pk)) == {history["fine"].pk}


def test_text_finds_job_names_handlers_and_errors_in_any_case(history, tenant):
    scope = [tenant.pk]
    assert _search(scope, "billing") == {history["billing"].pk}  # the job's name
    assert _search(scope, "NOOP") == {history["fine"].pk}  # the handler
    assert _search(scope, "ledger") == {history["billing"].pk, history["sync"].pk}  # the errors, any case
    assert _search(scope, "nothing like it") == set()


def test_other_filters_still_apply_to_a_search(history, tenant):
    scope = [tenant.pk]
    assert _search(scope, "ledger", state=S.DEAD) == {history["billing"].pk, history["sync"].pk}
    assert _search(scope, "ledger", state=S.SUCCEEDED) == set()
    assert _search(scope, "ledger", pool="elsewhere") == set()


def test_the_page_has_one_search_box_and_finds(member_client, history):
    html = member_client.get("/dashboard/executions/?q=ledger").content.decode()
    assert 'name="q" value="ledger"' in html
    assert str(history["billing"].pk)[:8] in html and str(history["sync"].pk)[:8] in html
    assert str(history["theirs"].pk)[:8] not in html and str(history["fine"].pk)[:8] not in html
    assert "Latest activity first" in html

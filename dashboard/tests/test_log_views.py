"""The execution page's logs panel (dashboard/executions/logs.py) and the panel on its own, which the page
reads again every second while the execution runs."""

from datetime import UTC, datetime

import pytest

from executions import logs, transitions
from executions.models import Execution

pytestmark = pytest.mark.django_db

T0 = datetime(2027, 3, 14, 9, 0, tzinfo=UTC)


def _write(execution, attempt: int, *messages: str) -> None:
    lines = [logs.Line(seq=n, at=T0, level="INFO", logger="etl", message=m) for n, m in enumerate(messages, start=1)]
    logs.log_lines_write(execution_id=execution.pk, attempt=attempt, lines=lines)


def test_the_page_shows_the_current_attempts_lines_and_links_the_others(member_client, tenant, make_job, drive):
    """A finished execution at attempt 2: its page shows attempt 2's lines, escaped, with a link to
    attempt 1's; ?logs=1 shows those instead. Nothing is polled: the run is over."""
    execution = drive(make_job(tenant).executions.get(), "SUCCEEDED")
    Execution.objects.filter(pk=execution.pk).update(attempt=2)
    _write(execution, 1, "first try")
    _write(execution, 2, "second <b>try</b>")

    page = member_client.get(f"/dashboard/executions/{execution.pk}/").content.decode()
    earlier = member_client.get(f"/dashboard/executions/{execution.pk}/?logs=1").content.decode()

    assert "second &lt;b&gt;try&lt;/b&gt;" in page and "first try" not in page
    assert 'data-testid="log-attempt-1"' in page
    assert f'data-poll-src="/dashboard/executions/{execution.pk}/logs' not in page  # (the alerts banner is polled)
    assert "first try" in earlier and "second" not in earlier


def test_a_running_executions_panel_is_polled_and_served_on_its_own(member_client, tenant, make_job, drive):
    """RUNNING: the panel carries data-poll-src, the URL of the panel alone, which answers with the
    lines logged so far and still asks to be polled; once the run has ended it no longer does."""
    execution = drive(make_job(tenant).executions.get(), "RUNNING")
    _write(execution, 1, "working")

    page = member_client.get(f"/dashboard/executions/{execution.pk}/").content.decode()
    url = f"/dashboard/executions/{execution.pk}/logs?attempt=1"
    panel = member_client.get(url)

    assert f'data-poll-src="{url}"' in page
    assert panel.status_code == 200
    assert panel.content.decode().startswith('<div class="panel" id="execution-logs"')
    assert "working" in panel.content.decode() and "data-poll-src" in panel.content.decode()
    token = Execution.objects.get(pk=execution.pk).lease_token
    assert transitions.succeed(execution_id=execution.pk, lease_token=token, now=T0, result=None)
    assert "data-poll-src" not in member_client.get(url).content.decode()


def test_another_tenants_panel_is_not_found(member_client, other_tenant, make_job):
    execution = make_job(other_tenant).executions.get()

    assert member_client.get(f"/dashboard/executions/{execution.pk}/logs").status_code == 404


def test_a_bad_attempt_shows_the_current_one(member_client, tenant, make_job):
    execution = make_job(tenant).executions.get()
    _write(execution, 1, "only line")

    for attempt in ("0", "x", "9" * 5000, "7"):
        body = member_client.get(f"/dashboard/executions/{execution.pk}/logs?attempt={attempt}").content.decode()
        assert "only line" in body, attempt

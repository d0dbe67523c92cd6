"""GET /v1/dead-letter/groups and POST /v1/dead-letter/groups/{fingerprint}/retry · /discard:
the caller's DEAD executions by error fingerprint, and a whole group re-driven or discarded."""

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from executions import transitions
from executions.models import Execution
from executions.states import ExecutionState as S
from readmodels import dead_letter

pytestmark = pytest.mark.django_db


def _dead(make_job, tenant, error: str, name: str = "job") -> Execution:
    return _fail_for_good(make_job(tenant, name=name, handler="fail").executions.get(), error)


def _fail_for_good(execution: Execution, error: str) -> Execution:
    """PENDING → … → DEAD with `error`, now."""
    now = timezone.now()
    transitions.queue_many([execution.pk], now=now, publish_grace=timedelta(seconds=30))
    token = Execution.objects.get(pk=execution.pk).lease_token
    transitions.start(execution_id=execution.pk, lease_token=token, now=now, worker_id="w", lease=timedelta(seconds=30))
    transitions.fail(execution_id=execution.pk, lease_token=token, now=now, error=error, traceback="")
    transitions.discard(execution_id=execution.pk, source=S.FAILED, now=now, message="exhausted")
    return Execution.objects.get(pk=execution.pk)


def test_groups_list_the_callers_dead_executions_by_fingerprint(api, other_api, tenant, other_tenant, make_job):
    for n in range(3):
        _dead(make_job, tenant, f"HTTPError: 503 for order {n}", name=f"sync-{n}")
    newest = _dead(make_job, tenant, "KeyError: 'customer'")
    _dead(make_job, other_tenant, "HTTPError: 503 for order 9")

    body = api.get("/v1/dead-letter/groups").json()

    assert body["total"] == 4 and body["moreGroups"] == 0
    assert [(g["pattern"], g["count"], g["jobs"]) for g in body["results"]] == [
        ("KeyError: <str>", 1, 1),
        ("HTTPError: <n> for order <n>", 3, 3),
    ]
    first = body["results"][0]
    assert first["exceptionType"] == "KeyError" and first["sampleExecutionId"] == str(newest.pk)
    assert first["sampleError"] == "KeyError: 'customer'" and first["fingerprint"] == newest.error_fingerprint
    assert first["firstSeen"] and first["lastSeen"] and first["pools"] == 1
    assert other_api.get("/v1/dead-letter/groups").json()["total"] == 1


def test_retrying_a_group_redrives_every_one_of_the_callers(api, tenant, other_tenant, make_job):
    mine = [_dead(make_job, tenant, f"TimeoutError: after {n} s") for n in range(3)]
    theirs = _dead(make_job, other_tenant, "TimeoutError: after 1 s")
    key = mine[0].error_fingerprint

    body = api.post(f"/v1/dead-letter/groups/{key}/retry").json()

    assert body == {"fingerprint": key, "action": "retry", "done": 3, "refused": 0, "remaining": 0, "cursor": None}
    assert {Execution.objects.get(pk=e.pk).state for e in mine} == {S.PENDING}
    assert Execution.objects.get(pk=theirs.pk).state == S.DEAD
    # Audited as the dashboard's bulk retry is: a row per execution, one request id, the token named.
    rows = list(AuditEntry.objects.filter(action="execution.retry"))
    assert sorted(r.target_id for r in rows) == sorted(str(e.pk) for e in mine)
    assert {(r.outcome, r.actor_kind) for r in rows} == {("OK", "api")} and len({r.request_id for r in rows}) == 1


def test_discarding_a_group_moves_it_to_discarded(api, tenant, make_job):
    mine = [_dead(make_job, tenant, f"OSError: disk {n} full") for n in range(2)]
    key = mine[0].error_fingerprint

    body = api.post(f"/v1/dead-letter/groups/{key}/discard").json()

    assert (body["done"], body["remaining"]) == (2, 0)
    assert {Execution.objects.get(pk=e.pk).state for e in mine} == {S.DISCARDED}
    rows = AuditEntry.objects.filter(action="execution.discard")
    assert sorted(r.target_id for r in rows) == sorted(str(e.pk) for e in mine)
    assert api.get("/v1/dead-letter/groups").json()["results"] == []
    assert api.get("/v1/executions?state=DISCARDED").json()["results"][0]["state"] == "DISCARDED"
    assert api.post(f"/v1/executions/{mine[0].pk}/retry").status_code == 409


def test_a_large_group_answers_with_what_remains(api, tenant, make_job, monkeypatch):
    mine = [_dead(make_job, tenant, f"OSError: disk {n} full") for n in range(3)]
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    monkeypatch.setattr(dead_letter, "ACTION_SECONDS", 0.0)
    key = mine[0].error_fingerprint
    assert api.post(f"/v1/dead-letter/groups/{key}/discard").json()["remaining"] == 1
    assert api.post(f"/v1/dead-letter/groups/{key}/discard").json()["remaining"] == 0


def test_a_pass_continued_by_its_cursor_never_takes_one_it_redrove_again(api, tenant, make_job, monkeypatch):
    """One batch of 2 per request: the first answer's cursor continues the pass over the 3 that
    were DEAD when it began. One re-driven by the first request has failed again since: the
    second request does not re-drive it (its handler would run twice), and the pass ends."""
    mine = [_dead(make_job, tenant, f"OSError: disk {n} full") for n in range(3)]
    monkeypatch.setattr(dead_letter, "BATCH", 2)
    monkeypatch.setattr(dead_letter, "ACTION_SECONDS", 0.0)
    key = mine[0].error_fingerprint
    url = f"/v1/dead-letter/groups/{key}/retry"

    first = api.post(url).json()
    assert (first["done"], first["remaining"]) == (2, 1)
    again = next(e for e in mine if Execution.objects.get(pk=e.pk).state == S.PENDING)
    _fail_for_good(again, "OSError: disk 7 full")  # re-driven, and failed again at once: in the group again
    second = api.post(url, QUERY_STRING=urlencode({"cursor": first.get("cursor")})).json()

    assert Execution.objects.get(pk=again.pk).state == S.DEAD
    assert {Execution.objects.get(pk=e.pk).attempt for e in mine} == {2}
    assert (second["done"], second["remaining"], second["cursor"]) == (1, 0, None)
    # The pass is over: its cursor again finds nothing, and answers so rather than a 404.
    third = api.post(url, QUERY_STRING=urlencode({"cursor": first["cursor"]})).json()
    assert (third["done"], third["remaining"]) == (0, 0)


@pytest.mark.parametrize("cursor", ["", "nonsense", f"2.{'0' * 32}.1.{'0' * 31}"])
def test_a_cursor_that_names_no_pass_is_a_400_naming_it(api, tenant, make_job, cursor):
    key = _dead(make_job, tenant, "KeyError: 'x'").error_fingerprint
    response = api.post(f"/v1/dead-letter/groups/{key}/discard", QUERY_STRING=urlencode({"cursor": cursor}))
    assert response.status_code == 400 and "cursor" in response.json()
    assert Execution.objects.get(error_fingerprint=key).state == S.DEAD


def test_an_unknown_or_other_tenants_group_is_a_404(api, other_api, tenant, make_job):
    key = _dead(make_job, tenant, "KeyError: 'x'").error_fingerprint
    assert other_api.post(f"/v1/dead-letter/groups/{key}/discard").status_code == 404
    assert api.post("/v1/dead-letter/groups/not-a-key/retry").status_code == 404
    assert api.post("/v1/dead-letter/groups/0000000000000000/retry").status_code == 404
    assert Execution.objects.get(error_fingerprint=key).state == S.DEAD

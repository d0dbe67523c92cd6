"""A job's `target.rateLimit` through the API (and a workflow step's), `pendingReason`
RATE_LIMITED, and the `rate_limit` command and admin page that define the limits. What a limit
does to admission and starts is scheduling/tests/test_rate_limiting.py's."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import AuditEntry
from executions.models import Execution
from jobs.models import Job
from pools import rate_limits
from pools.models import RateLimit
from testing.steps import dispatch

pytestmark = pytest.mark.django_db


def create(api, target: dict, **fields):
    body = {"name": "charge", "type": "DELAYED", "delaySec": 0, "target": {"handler": "noop", **target}}
    return api.post("/v1/jobs", {**body, **fields}, format="json")


def test_a_target_names_a_defined_limit_and_answers_it_only_then(api):
    rate_limits.define(name="payments", per_second=10)

    limited = create(api, {"rateLimit": "payments"})
    plain = create(api, {})

    assert limited.status_code == 201, limited.json()
    assert limited.json()["target"] == {"pool": "default", "handler": "noop", "rateLimit": "payments"}
    assert plain.json()["target"] == {"pool": "default", "handler": "noop"}
    assert Job.objects.get(pk=plain.json()["jobId"]).rate_limit is None


@pytest.mark.parametrize("value", ["nope", "", "a" * 65, 7, "pay\x00ments"])
def test_an_unknown_or_bad_limit_is_a_400_naming_the_field_and_creates_nothing(api, value):
    rate_limits.define(name="payments", per_second=10)

    response = create(api, {"rateLimit": value})

    assert response.status_code == 400
    assert "rateLimit" in str(response.json()["target"]), response.json()
    assert not Job.objects.exists()


def test_an_unknown_limit_lists_the_known_ones(api):
    rate_limits.define(name="payments", per_second=10)
    message = create(api, {"rateLimit": "nope"}).json()["target"]["rateLimit"][0]
    assert message == 'unknown rate limit "nope"; known: payments'


def test_patch_sets_keeps_and_clears_it_and_versions_record_it(api):
    rate_limits.define(name="payments", per_second=10)
    job_id = create(api, {}).json()["jobId"]

    named = api.patch(f"/v1/jobs/{job_id}", {"target": {"rateLimit": "payments"}}, format="json")
    kept = api.patch(f"/v1/jobs/{job_id}", {"target": {"handler": "noop"}}, format="json")
    assert named.status_code == 200 and kept.json()["target"]["rateLimit"] == "payments"
    cleared = api.patch(f"/v1/jobs/{job_id}", {"target": {"rateLimit": None}}, format="json")
    assert cleared.status_code == 200 and "rateLimit" not in cleared.json()["target"]

    versions = api.get(f"/v1/jobs/{job_id}/versions").json()["results"]
    changes = {(c["field"], c["from"], c["to"]) for v in versions for c in v["changes"]}
    assert ("target.rateLimit", None, "payments") in changes and ("target.rateLimit", "payments", None) in changes
    # Restoring the first version (no limit) unsets it again.
    first = versions[-1]["version"]
    restored = api.post(f"/v1/jobs/{job_id}/versions/{first}/restore")
    assert restored.status_code == 200, restored.json()
    assert "rateLimit" not in restored.json()["job"]["target"]


def test_a_workflow_step_names_its_own(api):
    rate_limits.define(name="payments", per_second=10)
    step = {"name": "charge", "target": {"handler": "noop", "rateLimit": "payments"}}
    response = api.post(
        "/v1/jobs",
        {
            "name": "wf",
            "type": "DELAYED",
            "delaySec": 0,
            "workflow": {"steps": [step, {"name": "b", "target": {"handler": "noop"}}]},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    steps = response.json()["workflow"]["steps"]
    assert steps[0]["target"] == {"handler": "noop", "pool": "default", "rateLimit": "payments"}
    assert steps[1]["target"] == {"handler": "noop", "pool": "default"}
    bad = {"name": "charge", "target": {"handler": "noop", "rateLimit": "nope"}}
    refused = api.post(
        "/v1/jobs", {"name": "wf", "type": "DELAYED", "delaySec": 0, "workflow": {"steps": [bad]}}, format="json"
    )
    assert refused.status_code == 400 and "rateLimit" in str(refused.json())


def test_an_execution_waiting_for_its_turn_says_rate_limited_with_the_limits_name(api, settings):
    settings.TICKWORK_ADMIT_HEADROOM, settings.TICKWORK_ADMIT_MAX_BUFFER = 1.0, 0
    rate_limits.define(name="payments", per_second=0.5)
    ids = [create(api, {"rateLimit": "payments"}).json()["jobId"] for _ in range(2)]
    dispatch(timezone.now() + timedelta(seconds=1), slots=10)

    waiting = Execution.objects.get(job_id__in=ids, state="PENDING")
    body = api.get(f"/v1/executions/{waiting.pk}").json()

    assert body["pendingReason"] == "RATE_LIMITED"
    assert body["pendingDetail"].startswith("rate limit payments (0.5/s, burst 1) is reached; its turn comes at")


def test_the_command_sets_changes_lists_and_deletes_limits():
    out = StringIO()
    call_command("rate_limit", "set", "payments", "--per-second", "20", "--burst", "5", stdout=out)
    call_command("rate_limit", "set", "payments", "--per-second", "10", stdout=out)
    call_command("rate_limit", "list", stdout=out)
    assert out.getvalue().splitlines() == [
        "defined rate limit payments: 20/s, burst 5",
        "changed rate limit payments: 10/s, burst 1",
        "payments: 10/s, burst 1; handlers: none",
    ]
    with pytest.raises(CommandError, match="above 0"):
        call_command("rate_limit", "set", "payments", "--per-second", "0")
    with pytest.raises(CommandError, match="not a limit's name"):
        call_command("rate_limit", "set", "pay ments", "--per-second", "1")
    call_command("rate_limit", "delete", "payments", stdout=out)
    assert not RateLimit.objects.exists()
    with pytest.raises(CommandError, match="no rate limit"):
        call_command("rate_limit", "delete", "payments")
    audited = list(AuditEntry.objects.order_by("id").values_list("action", "outcome", "actor_kind"))
    assert [(a, o) for a, o, _ in audited] == [
        ("rate_limit.set", "OK"),
        ("rate_limit.set", "OK"),
        ("rate_limit.set", "INVALID"),
        ("rate_limit.set", "INVALID"),
        ("rate_limit.delete", "OK"),
        ("rate_limit.delete", "NOT_FOUND"),
    ]
    assert {kind for _, _, kind in audited} == {"cli"}


def test_the_admin_defines_a_limit(admin_client):
    response = admin_client.post(
        "/admin/pools/ratelimit/add/", {"name": "payments", "per_second": "2.5", "burst": "3"}, follow=True
    )
    assert response.status_code == 200
    assert RateLimit.objects.get(name="payments").per_second == 2.5
    refused = admin_client.post("/admin/pools/ratelimit/add/", {"name": "bad name", "per_second": "0", "burst": "1"})
    assert refused.status_code == 200 and RateLimit.objects.count() == 1

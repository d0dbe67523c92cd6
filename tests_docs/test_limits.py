"""What the README and docs/ say Tickwork does not do, held to what it does.

The README's "Guarantees and their limits" said a tenant's weight and concurrency limit were
"stored but not yet enforced by the claim" long after the claim enforced both (docs/admission.md):
an operator reading it would have built a limiter of their own. These tests fail on a doc that
calls an enforced quota unenforced, and exercise each quota where the README says it is enforced,
set as the README sets it (`update_tenant`)."""

import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from executions.models import Execution
from tenants.models import Tenant
from tenants.services import tenant_create
from testing.steps import dispatch, start, succeed

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The quotas by every name the docs give them: the commands' flags, the model's fields, the API's.
QUOTAS = {
    "weight": r"weight",
    "concurrency limit": r"max.?concurrent|concurrency limit",
    "active jobs": r"max.?active.?jobs",
    "submit rate": r"submit.?rate",
}
UNENFORCED = re.compile(r"not (yet )?(enforced|applied|checked|implemented)|unenforced|stored but|ignored", re.I)


def _sentences(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # prose only
    return [" ".join(s.split()) for s in re.split(r"(?<=[.;:])\s+(?=[A-Z`*])|\n\s*\n|\n- ", text)]


def test_no_doc_says_a_quota_is_not_enforced():
    """Every quota is enforced (below): a sentence that names one and says otherwise is false."""
    false = [
        f"{path.name}: {sentence}"
        for path in DOCS
        for sentence in _sentences(path)
        if UNENFORCED.search(sentence) and any(re.search(name, sentence, re.I) for name in QUOTAS.values())
    ]
    assert false == []


def test_the_readme_says_where_each_quota_is_enforced():
    readme = (ROOT / "README.md").read_text()
    limits = readme[readme.index("## Guarantees and their limits") : readme.index("## Running the tests")]
    [quotas] = [" ".join(item.split()) for item in limits.split("\n- ") if "Tenant quotas" in item]
    assert re.search(r"--max-active-jobs.*--submit-rate.*submission \(429", quotas), quotas
    assert re.search(r"--weight.*--max-concurrent.*by the dispatcher's claim", quotas), quotas


def _due(make_job, tenant, count, now):
    return [make_job(tenant, run_at=now + timedelta(milliseconds=i)) for i in range(count)]


def _admitted(sent) -> list[str]:
    slugs = dict(Execution.objects.filter(pk__in=[d.execution_id for d in sent]).values_list("id", "tenant__slug"))
    return [slugs[Execution._meta.pk.to_python(d.execution_id)] for d in sent]


@pytest.mark.usefixtures("exact_admission")
def test_the_claim_enforces_weight_and_the_concurrency_limit_set_by_update_tenant(db, make_job):
    """`update_tenant heavy --weight 3`: of a contended pool's starts, heavy gets three for light's
    one. `update_tenant capped --max-concurrent 2`: never more than 2 of capped's QUEUED or
    RUNNING, however many slots are free; the next is admitted as one ends."""
    heavy, light = tenant_create(slug="heavy"), tenant_create(slug="light")
    call_command("update_tenant", "heavy", "--weight", "3")
    now = timezone.now()
    _due(make_job, heavy, 40, now)
    _due(make_job, light, 40, now)
    later = now + timedelta(seconds=1)
    starts: list[str] = []
    for _ in range(10):  # four slots, freed between claims: 40 starts
        sent = dispatch(later, slots=4)[1]
        starts += _admitted(sent)
        for d in sent:
            start(d.execution_id, now=later)
            succeed(d.execution_id, now=later)
    assert Counter(starts) == {"heavy": 30, "light": 10}

    capped = tenant_create(slug="capped")
    call_command("update_tenant", "capped", "--max-concurrent", "2")
    assert Tenant.objects.get(slug="capped").max_concurrent_executions == 2
    _due(make_job, capped, 5, now)
    first = dispatch(later, slots=100)[1]
    assert Counter(_admitted(first))["capped"] == 2
    assert "capped" not in _admitted(dispatch(later, slots=100)[1])
    start(first[0].execution_id, now=later)
    succeed(first[0].execution_id, now=later)
    assert Counter(_admitted(dispatch(later, slots=100)[1]))["capped"] == 1
    waiting = Execution.objects.filter(tenant=capped, state="PENDING").count()
    assert waiting == 2


def test_submission_enforces_max_active_jobs_and_the_submit_rate(api, tenant):
    """`update_tenant acme --max-active-jobs 1`: the second active job is refused 429; with
    `--submit-rate 1` instead, the second submission of the minute under it is."""
    body = {"name": "j", "type": "DELAYED", "delaySec": 600, "target": {"handler": "noop"}}
    call_command("update_tenant", "acme", "--max-active-jobs", "1")
    assert api.post("/v1/jobs", body, format="json").status_code == 201
    refused = api.post("/v1/jobs", body, format="json")
    assert refused.status_code == 429 and "Retry-After" in refused
    call_command("update_tenant", "acme", "--max-active-jobs", "none", "--submit-rate", "1")
    assert api.post("/v1/jobs", body, format="json").status_code == 201
    assert api.post("/v1/jobs", body, format="json").status_code == 429

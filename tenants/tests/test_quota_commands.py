"""`create_tenant … --weight --max-concurrent --max-active-jobs --submit-rate` and `update_tenant`,
which also clears a limit with 'none'."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def test_create_tenant_with_quotas():
    out = StringIO()
    call_command(
        "create_tenant", "initech", "--weight", "3", "--max-concurrent", "5", "--max-active-jobs", "100",
        "--submit-rate", "60", stdout=out,
    )  # fmt: skip
    tenant = Tenant.objects.get(slug="initech")
    assert (tenant.weight, tenant.max_concurrent_executions, tenant.max_active_jobs) == (3, 5, 100)
    assert tenant.submit_rate_per_minute == 60
    assert "weight 3, max concurrent 5" in out.getvalue()


def test_update_tenant_changes_only_what_is_given_and_none_clears_a_limit(tenant):
    call_command("update_tenant", tenant.slug, "--max-concurrent", "2", "--submit-rate", "10", stdout=StringIO())
    call_command("update_tenant", tenant.slug, "--weight", "4", "--submit-rate", "none", stdout=StringIO())
    tenant.refresh_from_db()
    assert (tenant.weight, tenant.max_concurrent_executions, tenant.submit_rate_per_minute) == (4, 2, None)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--weight", "0"], "not positive"),
        (["--weight", "none"], "cannot be 'none'"),
        (["--max-concurrent", "-1"], "not positive"),
        (["--max-concurrent", "lots"], "not a whole number"),
    ],
)
def test_a_bad_quota_is_refused_with_a_message_and_changes_nothing(tenant, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("update_tenant", tenant.slug, *args, stdout=StringIO())
    tenant.refresh_from_db()
    assert (tenant.weight, tenant.max_concurrent_executions) == (1, None)


def test_update_tenant_of_an_unknown_tenant_or_with_nothing_to_change(tenant):
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        call_command("update_tenant", "nope", "--weight", "2", stdout=StringIO())
    with pytest.raises(CommandError, match="nothing to change"):
        call_command("update_tenant", tenant.slug, stdout=StringIO())

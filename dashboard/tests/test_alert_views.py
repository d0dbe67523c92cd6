"""Firing alerts on every page: a banner naming them (the caller's tenant's; staff see all, global
rules' too), its partial read again by the page, and the alerts page with summaries and rules."""

from django.utils import timezone

from alerts.models import Alert, AlertRule


def _alert(tenant, *, name="failures", state="FIRING", summary="failure rate 42% (21 of 50 runs ended DEAD)"):
    rule = AlertRule.objects.create(
        tenant=tenant, name=name, kind="FAILURE_RATE", threshold=20, channels=[{"type": "email", "to": "a@b.co"}]
    )
    now = timezone.now()
    return Alert.objects.create(
        rule=rule,
        tenant=tenant,
        subject="all",
        fired_at=now,
        summary=summary,
        state=state,
        resolved_at=None if state == "FIRING" else now,
    )


def test_every_page_shows_the_callers_firing_alerts(member_client, tenant, other_tenant):
    _alert(tenant, name="acme failures")
    _alert(other_tenant, name="globex failures")
    _alert(tenant, name="old one", state="RESOLVED")

    for url in ("/dashboard/", "/dashboard/jobs/", "/dashboard/executions/", "/dashboard/audit/"):
        page = member_client.get(url).content.decode()
        assert 'data-testid="alert-banner"' in page, url
        assert "1 alert firing" in page and "acme failures" in page and "42% (21 of 50" in page
        assert "globex failures" not in page and "old one" not in page


def test_staff_see_every_tenants_and_the_global_alerts(staff_client, tenant, other_tenant):
    _alert(tenant, name="acme failures")
    _alert(None, name="dispatcher down")

    page = staff_client.get("/dashboard/").content.decode()

    assert "2 alerts firing" in page and "acme failures" in page and "dispatcher down" in page


def test_no_banner_without_a_firing_alert_and_the_partial_is_polled(member_client, tenant):
    page = member_client.get("/dashboard/").content.decode()
    assert 'data-testid="alert-banner"' not in page
    assert 'data-poll-src="/dashboard/alerts/banner"' in page

    _alert(tenant)
    partial = member_client.get("/dashboard/alerts/banner").content.decode()
    assert partial.startswith('<div id="alert-banner"') and "1 alert firing" in partial


def test_the_alerts_page_lists_active_then_recent_alerts_and_the_rules(member_client, tenant, other_tenant):
    _alert(tenant, name="resolved one", state="RESOLVED")
    _alert(tenant, name="firing one")
    _alert(other_tenant, name="theirs")

    page = member_client.get("/dashboard/alerts/").content.decode()

    assert page.index("firing one") < page.index("resolved one")
    assert "theirs" not in page and 'data-testid="rules-table"' in page


def test_the_alerts_page_lists_rules_of_every_channel_kind(member_client, tenant):
    """A webhook channel has a `url` and no `to`, an email channel the other way round: the page
    names each channel's target whichever kind it is, alone or mixed (a webhook's rule answered
    500 before: the template read `to` of every channel)."""
    channels = {
        "to the pager": [{"type": "webhook", "url": "https://hooks.example.com/tickwork"}],
        "to the on-call": [{"type": "email", "to": "oncall@example.com"}],
        "to both": [
            {"type": "email", "to": "team@example.com"},
            {"type": "webhook", "url": "https://chat.example.com/hook"},
        ],
    }
    for name, rule_channels in channels.items():
        AlertRule.objects.create(tenant=tenant, name=name, kind="DEAD_LETTER", threshold=0, channels=rule_channels)

    response = member_client.get("/dashboard/alerts/")

    assert response.status_code == 200
    page = response.content.decode()
    for shown in (
        "webhook: https://hooks.example.com/tickwork",
        "email: oncall@example.com",
        "email: team@example.com",
        "webhook: https://chat.example.com/hook",
    ):
        assert shown in page

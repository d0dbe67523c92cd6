"""The firing alerts' banner that every page shows (base.html, _alert_banner.html)."""

from alerts.selectors import firing as firing_alerts

# The most firing alerts the banner names; the most it counts exactly (past it, "50+").
BANNER_NAMES = 3
BANNER_CAP = 50


def banner_context(scope: list[int] | None) -> dict:
    """What the firing alerts' banner shows: one query, on the partial index of FIRING alerts."""
    alerts = firing_alerts(scope=scope, limit=BANNER_CAP + 1)
    return {
        "firing_alerts": alerts[:BANNER_NAMES],
        "firing_count": min(len(alerts), BANNER_CAP),
        "firing_more": len(alerts) > BANNER_CAP,
    }

"""After-commit messages about state changes, for the live views.

Sent to the Channels layer group `executions` (Redis in production). Losing one is harmless:
the pages also refresh from the database, and the row is always the truth.
"""

import logging
from typing import Any

logger = logging.getLogger(__name__)
GROUP = "executions"


def publish_state_changes(changes: list[tuple[Any, Any, int, str]]) -> None:
    if not changes:
        return
    try:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        message = {
            "type": "executions.changed",
            "changes": [
                {"executionId": str(eid), "jobId": str(jid), "tenantId": tid, "state": str(state)}
                for eid, jid, tid, state in changes
            ],
        }
        async_to_sync(layer.group_send)(GROUP, message)
    except Exception:  # a live view is a convenience; never fail a state change over it
        logger.debug("live update not sent", exc_info=True)

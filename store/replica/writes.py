"""Who wrote lately: a client's reads within the window after its write (TICKWORK_REPLICA_WINDOW_
SECONDS) go to the primary, so that it reads its own writes. The marker is a key of Django's cache
that expires with the window: in Redis when REDIS_URL is set, so every web process sees it; in the
process's own memory otherwise (one web process, or a client may land on another that has not
seen its write)."""

import logging
import math

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

_PREFIX = "replica-wrote:"


def note_write(client: str) -> None:
    """`client` ("tenant:7", "user:3") has just written."""
    try:
        cache.set(_PREFIX + client, 1, timeout=math.ceil(settings.TICKWORK_REPLICA_WINDOW_SECONDS))
    except Exception as exc:  # the cache is down: its reads may miss the write for a lag's time
        logger.warning("replica: could not mark %s's write (%s)", client, exc)


def wrote_recently(client: str) -> bool:
    """Whether `client` wrote within the window; yes when the cache cannot say."""
    try:
        return cache.get(_PREFIX + client) is not None
    except Exception:
        return True

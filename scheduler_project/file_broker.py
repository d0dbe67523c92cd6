"""kombu's filesystem transport (the embedded default's broker), with each message written whole
before a consumer can see it.

kombu writes a message straight to its final name and only then fills it. A worker polling the
folder could move the file away in between and read it empty: the JSONDecodeError ended the
worker (Celery's "Unrecoverable error") and the message was gone, until the sweeper re-published
its run. Seen in the embedded end-to-end tests. Here the message is written under a name that
consumers pass over (they take only `<queue>.msg`) and renamed into place, which is atomic.
"""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]  # the stubs of its two bases name the parameter differently
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"  # kombu's naming and order
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def install() -> None:
    """Make `filesystem://` mean this transport in this process (before any connection is made)."""
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"

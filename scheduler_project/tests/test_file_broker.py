"""The embedded default's broker never shows a worker a message that is still being written."""

import json

import kombu

from scheduler_project import file_broker


def test_filesystem_urls_use_the_whole_message_transport():
    """Every process that loads the Celery app resolves filesystem:// to file_broker.Transport."""
    assert isinstance(kombu.Connection("filesystem://").transport, file_broker.Transport)


def test_a_message_being_written_is_not_visible_to_a_consumer(tmp_path, monkeypatch):
    """While the message's bytes are being made, the folder holds no `<queue>.msg` a consumer would
    take (kombu's own transport had the empty file there: a worker read it empty and died); once
    written, a consumer gets the whole message."""
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "store_processed": False}
    connection = kombu.Connection("filesystem://", transport_options=options)
    channel = connection.channel()
    seen_while_writing = []

    def dumps(payload):
        seen_while_writing.extend(name for name in (p.name for p in tmp_path.iterdir()) if name.endswith(".msg"))
        return json.dumps(payload)

    monkeypatch.setattr(file_broker, "dumps", dumps)
    channel._put("tickwork.default", {"body": "x"})

    assert seen_while_writing == []
    assert channel._get("tickwork.default") == {"body": "x"}
    connection.release()

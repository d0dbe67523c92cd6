"""Request bodies through the real servers (daphne, and gunicorn for the WSGI side): chunked bodies
arrive whole, and a body over TICKWORK_MAX_REQUEST_BYTES is refused with 413 before it is read."""

import json
import socket
import time

import pytest

from jobs.models import Job
from tenants.services import token_create

JOB = json.dumps({"name": "chunked", "type": "DELAYED", "delaySec": 60, "target": {"handler": "noop"}}).encode()


def _head(path: str, *headers: str) -> bytes:
    return "\r\n".join([f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]).encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _read_response(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response (Content-Length framed)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


def _closed(sock: socket.socket, timeout: float) -> bool:
    """The server ended the connection (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize("server", ["daphne", "gunicorn"])
def test_defect4_chunked_post_creates_the_job(web_server, server, tenant):
    """A `Transfer-Encoding: chunked` POST /v1/jobs is read whole: 201 and the job exists
    (it answered 400 "field required": Django read the body as empty without a Content-Length)."""
    _, token = token_create(tenant=tenant)
    running = web_server(server)
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(
            _head(
                "/v1/jobs",
                f"Authorization: Bearer {token}",
                "Content-Type: application/json",
                "Transfer-Encoding: chunked",
            )
        )
        sock.sendall(_chunk(JOB[:20]) + _chunk(JOB[20:]) + b"0\r\n\r\n")
        status, _, body = _read_response(sock, timeout=30)
    assert status == 201, body
    assert Job.objects.filter(tenant=tenant, name="chunked", pk=json.loads(body)["jobId"]).exists()


@pytest.mark.parametrize("server", ["daphne", "gunicorn"])
def test_defect4_oversized_content_length_refused_before_the_body_is_read(web_server, server):
    """An unauthenticated POST announcing 200 MiB is answered 413 (JSON) as soon as its headers
    are in, without waiting for the body, and the connection is closed."""
    running = web_server(server, TICKWORK_MAX_REQUEST_BYTES="1048576")
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(_head("/v1/jobs", "Content-Type: application/json", f"Content-Length: {200 * 1024 * 1024}"))
        status, headers, body = _read_response(sock, timeout=10)  # no body was sent at all
        assert status == 413
        assert headers["content-type"] == "application/json"
        assert "1048576" in json.loads(body)["detail"]
        assert _closed(sock, timeout=10)


@pytest.mark.parametrize("server", ["daphne", "gunicorn"])
def test_a_refusal_before_django_has_the_error_shape_and_the_request_id(web_server, server):
    """Issue 33: the 413 answered by the server before Django (daphne's request, the WSGI
    middleware) is in the API's error shape and carries the caller's X-Request-Id."""
    given = "5f0c5f43-8d2b-4f7e-9a51-0b6d1d4a2c10"
    running = web_server(server, TICKWORK_MAX_REQUEST_BYTES="1048576")
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(_head("/v1/jobs", f"Content-Length: {200 * 1024 * 1024}", f"X-Request-Id: {given}"))
        status, headers, body = _read_response(sock, timeout=10)
    assert status == 413
    assert headers["x-request-id"] == given
    assert json.loads(body) == {
        "code": "payload_too_large",
        "detail": "request body is over the limit of 1048576 bytes (TICKWORK_MAX_REQUEST_BYTES)",
    }


@pytest.mark.parametrize("server", ["daphne", "gunicorn"])
def test_defect4_oversized_chunked_body_refused_once_past_the_limit(web_server, server):
    """A chunked body gets no further than the limit: streaming 200 MiB, the client hears 413 after
    about the limit's worth, and the connection is closed before the rest could be sent."""
    running = web_server(server, TICKWORK_MAX_REQUEST_BYTES="1048576")
    piece = _chunk(b"x" * 65536)
    sent = 0
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(_head("/v1/jobs", "Content-Type: application/json", "Transfer-Encoding: chunked"))
        sock.settimeout(0.05)
        deadline = time.monotonic() + 30
        answer = b""
        try:
            while sent < 200 * 1024 * 1024 and time.monotonic() < deadline:
                sock.sendall(piece)
                sent += len(piece)
                try:
                    answer = sock.recv(65536)
                except TimeoutError:
                    continue
                break
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert sent < 8 * 1024 * 1024, f"the client got to send {sent} bytes"
        assert _closed(sock, timeout=10)


def _through_middleware(headers: list[tuple[bytes, bytes]], messages: list[dict]) -> tuple[list[dict], list]:
    """Run RequestBodyLimit over a recording app; returns what was sent and what the app saw."""
    import asyncio

    from web.request_body import RequestBodyLimit

    seen, sent = [], []

    async def app(scope, receive, send):
        seen.append((scope["headers"], await receive()))

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/jobs", "headers": headers}
    asyncio.run(RequestBodyLimit(app)(scope, receive, send))
    return sent, seen


def test_defect4_middleware_refuses_by_content_length_without_reading(settings):
    """For servers that stream bodies to the application: an announced length over the limit is
    answered 413 and the body is never received."""
    settings.TICKWORK_MAX_REQUEST_BYTES = 100
    sent, seen = _through_middleware([(b"content-length", b"101")], [])  # receive() would fail
    assert sent[0]["status"] == 413 and not seen


def test_defect4_middleware_gives_a_chunked_body_its_length(settings):
    """A body without Content-Length is counted against the limit and passed on with its length."""
    settings.TICKWORK_MAX_REQUEST_BYTES = 100
    chunked = [(b"transfer-encoding", b"chunked")]
    body = [{"type": "http.request", "body": b"x" * 60, "more_body": True}]
    sent, seen = _through_middleware(chunked, [*body, {"type": "http.request", "body": b"y" * 30}])
    assert not sent
    assert seen == [
        ([(b"content-length", b"90")], {"type": "http.request", "body": b"x" * 60 + b"y" * 30, "more_body": False})
    ]
    sent, seen = _through_middleware(chunked, [*body, *body])
    assert sent[0]["status"] == 413 and not seen

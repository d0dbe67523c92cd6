from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from outbound.http_call import (
    IDEMPOTENCY_HEADER,
    MAX_RESPONSE_BYTES,
    SIGNATURE_HEADER,
    HttpCallError,
    perform_request,
    sign,
)

SECRET = "whsec_test"
SLOW_SECONDS = 1.5


class _Handler(BaseHTTPRequestHandler):
    server: _RecordingServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        path = self.path.split("?")[0]
        if path == "/echo":
            self._reply(200, "application/json", json.dumps({"ok": True, "got": len(body)}).encode())
        elif path == "/text":
            self._reply(200, "text/plain; charset=utf-8", "héllo".encode())
        elif path == "/bad-json":
            self._reply(200, "application/json", b"not json")
        elif path == "/empty":
            self._reply(204, None, b"")
        elif path == "/big":
            self._reply(200, "text/plain", b"x" * (MAX_RESPONSE_BYTES * 3))
        elif path == "/fail":
            self._reply(500, "text/plain", b"boom " + b"y" * 2000)
        elif path == "/unavailable":
            self._reply(503, "text/plain", b"try later")
        elif path == "/slow":
            time.sleep(SLOW_SECONDS)
            self._reply(200, "text/plain", b"late")
        elif path == "/trickle":
            self._trickle()
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._reply(404, "text/plain", b"nope")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def _reply(self, status: int, content_type: str | None, payload: bytes) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # The client gave up (timeout / truncation tests).

    def _trickle(self) -> None:
        # Headers promptly, then one byte per 0.1s: every socket read beats
        # the per-read timeout, so only an overall deadline stops it.
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "100")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # Keep pytest output clean.


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.received: list[dict[str, Any]] = []


def _serve(server: _RecordingServer) -> Iterator[_RecordingServer]:
    thread = threading.Thread(
        # Short poll interval: shutdown() waits for it, once per test.
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        daemon=True,
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server() -> Iterator[_RecordingServer]:
    yield from _serve(_RecordingServer(("127.0.0.1", 0), _Handler))


def _base(server: _RecordingServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _call(url: str, **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "method": "POST",
        "url": url,
        "headers": None,
        "body": {"hello": "wörld", "n": [1, 2]},
        "secrets": [SECRET],
        "timeout": 5.0,
        "allow_private": True,
        "idempotency_key": "exec-123",
    }
    kwargs.update(overrides)
    return perform_request(**kwargs)


def _resolver_for(*ips: str) -> Any:
    calls: list[str] = []

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        calls.append(host)
        out: list[tuple[Any, ...]] = []
        for ip in ips:
            if ":" in ip:
                out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, port, 0, 0)))
            else:
                out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)))
        return out

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


# -- signing ----------------------------------------------------------------


def test_sign_format_and_value() -> None:
    value = sign("s3cret", 1_700_000_000, b'{"a":1}')
    expected = hmac.new(b"s3cret", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    assert value == f"t=1700000000,v1={expected}"


# -- success paths ----------------------------------------------------------


def test_json_body_signature_and_idempotency(server: _RecordingServer) -> None:
    before = int(time.time())
    result = _call(f"{_base(server)}/echo")
    after = int(time.time())

    assert result["status"] == 200
    req = server.received[-1]
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert req["method"] == "POST"
    assert json.loads(req["body"]) == {"hello": "wörld", "n": [1, 2]}
    assert headers["content-type"] == "application/json"
    assert headers[IDEMPOTENCY_HEADER.lower()] == "exec-123"
    assert result["body"] == {"ok": True, "got": len(req["body"])}

    # Verify the way a receiver would: from the raw bytes and the secret.
    fields = dict(part.split("=", 1) for part in headers[SIGNATURE_HEADER.lower()].split(","))
    assert before <= int(fields["t"]) <= after
    mac = hmac.new(SECRET.encode(), f"{fields['t']}.".encode() + req["body"], hashlib.sha256)
    assert hmac.compare_digest(fields["v1"], mac.hexdigest())


def test_our_headers_override_tenant_ones_but_content_type_is_kept(server: _RecordingServer) -> None:
    _call(
        f"{_base(server)}/echo",
        headers={
            "content-type": "application/vnd.api+json",
            "idempotency-key": "spoofed",
            "x-tickwork-signature": "t=1,v1=00",
            "X-Custom": "yes",
        },
    )
    headers = {k.lower(): v for k, v in server.received[-1]["headers"].items()}
    assert headers["content-type"] == "application/vnd.api+json"
    assert headers["idempotency-key"] == "exec-123"
    assert headers["x-tickwork-signature"] != "t=1,v1=00"
    assert headers["x-custom"] == "yes"


def test_string_body_sent_as_is_and_none_is_empty(server: _RecordingServer) -> None:
    _call(f"{_base(server)}/echo", body="raw=1&b=2")
    assert server.received[-1]["body"] == b"raw=1&b=2"
    _call(f"{_base(server)}/echo", body=None, method="PUT")
    assert server.received[-1]["body"] == b""
    assert server.received[-1]["method"] == "PUT"


def test_method_defaults_to_post(server: _RecordingServer) -> None:
    perform_request(
        url=f"{_base(server)}/echo",
        secrets=[SECRET],
        timeout=5.0,
        allow_private=True,
        idempotency_key="k",
    )
    assert server.received[-1]["method"] == "POST"


def test_text_and_empty_and_mislabelled_json(server: _RecordingServer) -> None:
    assert _call(f"{_base(server)}/text", method="GET") == {"status": 200, "body": "héllo"}
    assert _call(f"{_base(server)}/empty") == {"status": 204, "body": ""}
    assert _call(f"{_base(server)}/bad-json") == {"status": 200, "body": "not json"}


def test_body_truncated_to_64_kib(server: _RecordingServer) -> None:
    result = _call(f"{_base(server)}/big", method="GET")
    assert result["body"] == "x" * MAX_RESPONSE_BYTES


def test_connects_to_resolved_ip_with_original_host_header(server: _RecordingServer) -> None:
    port = server.server_address[1]
    resolver = _resolver_for("127.0.0.1")
    assert _call(f"http://hooks.example:{port}/echo", resolver=resolver)["status"] == 200
    # Resolved exactly once: the address checked is the address used, so a
    # DNS answer that changes between check and connect can't slip through.
    assert resolver.calls == ["hooks.example"]
    headers = {k.lower(): v for k, v in server.received[-1]["headers"].items()}
    assert headers["host"] == f"hooks.example:{port}"


def test_falls_back_to_next_address_when_connect_refused(server: _RecordingServer) -> None:
    port = server.server_address[1]
    # Nothing listens on 127.0.0.2 (the server is bound to 127.0.0.1 only).
    resolver = _resolver_for("127.0.0.2", "127.0.0.1")
    assert _call(f"http://hooks.example:{port}/echo", resolver=resolver)["status"] == 200


# -- failures ---------------------------------------------------------------


def test_500_is_error_with_status_and_body_snippet(server: _RecordingServer) -> None:
    url = f"{_base(server)}/fail"
    with pytest.raises(HttpCallError) as info:
        _call(url)
    message = str(info.value)
    assert message.startswith(f"HTTP 500 from {url}")
    assert "boom" in message
    assert len(message) < 700  # Body limited to its first 500 chars.


def test_503_message(server: _RecordingServer) -> None:
    url = f"{_base(server)}/unavailable"
    with pytest.raises(HttpCallError, match=r"^HTTP 503 from .*/unavailable: try later$"):
        _call(url)


def test_timeout(server: _RecordingServer) -> None:
    started = time.monotonic()
    with pytest.raises(HttpCallError, match=r"timeout after 0\.3s"):
        _call(f"{_base(server)}/slow", timeout=0.3)
    assert time.monotonic() - started < SLOW_SECONDS


def test_trickling_body_hits_overall_deadline(server: _RecordingServer) -> None:
    started = time.monotonic()
    with pytest.raises(HttpCallError, match=r"timeout after 0\.5s"):
        _call(f"{_base(server)}/trickle", timeout=0.5)
    assert time.monotonic() - started < 2.0


def test_redirect_is_not_followed(server: _RecordingServer) -> None:
    with pytest.raises(HttpCallError, match=r"HTTP 302 from .*not followed") as info:
        _call(f"{_base(server)}/redirect")
    assert "169.254.169.254" in str(info.value)
    assert [r["path"] for r in server.received] == ["/redirect"]


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Socket closed without listen(): the port is now (almost surely) free.
    with pytest.raises(HttpCallError, match=r"connection failed to .*refused"):
        _call(f"http://127.0.0.1:{port}/")


def test_dns_failure() -> None:
    def failing(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(HttpCallError, match=r"DNS resolution failed for nope\.invalid"):
        _call("https://nope.invalid/", resolver=failing)


# -- refusals ---------------------------------------------------------------


def test_loopback_refused_when_private_not_allowed(server: _RecordingServer) -> None:
    with pytest.raises(HttpCallError, match=r"^refused: 127\.0\.0\.1 is a loopback address"):
        _call(f"{_base(server)}/echo", allow_private=False)
    assert server.received == []


def test_localhost_name_refused_with_real_resolver(server: _RecordingServer) -> None:
    port = server.server_address[1]
    with pytest.raises(HttpCallError, match=r"^refused: .* is a loopback address \(localhost resolves"):
        _call(f"http://localhost:{port}/echo", allow_private=False)
    assert server.received == []


@pytest.mark.parametrize(
    ("ip", "expected"),
    [
        ("10.0.0.5", "refused: 10.0.0.5 is a private address"),
        ("192.168.1.1", "refused: 192.168.1.1 is a private address"),
        ("169.254.169.254", "refused: 169.254.169.254 is a link-local address"),
        ("::1", "refused: ::1 is a loopback address"),
        ("::ffff:127.0.0.1", "refused: {ip} is an IPv4-mapped loopback address (127.0.0.1)"),
        ("::ffff:10.1.2.3", "refused: {ip} is an IPv4-mapped private address (10.1.2.3)"),
        ("0.0.0.0", "refused: 0.0.0.0 is an unspecified address"),
        ("224.0.0.1", "refused: 224.0.0.1 is a multicast address"),
        ("fe80::1", "refused: fe80::1 is a link-local address"),
        ("fd00::1", "refused: fd00::1 is a private address"),
        ("100.100.100.200", "refused: 100.100.100.200 is a non-global address"),
        ("2002:7f00:1::", "refused: 2002:7f00:1:: is a 6to4 loopback address (127.0.0.1)"),
    ],
)
def test_non_public_addresses_refused_via_resolver(ip: str, expected: str) -> None:
    with pytest.raises(HttpCallError) as info:
        _call("https://evil.example/hook", allow_private=False, resolver=_resolver_for(ip))
    # {ip}: how ipaddress spells a mapped address differs across Pythons
    # (::ffff:7f00:1 vs ::ffff:127.0.0.1); the message uses its spelling.
    shown = expected.format(ip=ipaddress.ip_address(ip))
    assert str(info.value) == f"{shown} (evil.example resolves to it)"


@pytest.mark.parametrize("host", ["10.0.0.5", "169.254.169.254", "[::1]", "[::ffff:127.0.0.1]"])
def test_ip_literals_refused_without_resolver(host: str) -> None:
    def no_dns(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        raise AssertionError("IP literals must not be resolved")

    with pytest.raises(HttpCallError, match=r"^refused: .* address"):
        _call(f"http://{host}/", allow_private=False, resolver=no_dns)


def test_every_resolved_address_is_checked() -> None:
    # One public and one private answer: a client might pick either, so
    # the whole answer set must be refused.
    resolver = _resolver_for("93.184.216.34", "10.0.0.5")
    with pytest.raises(HttpCallError, match=r"^refused: 10\.0\.0\.5 is a private address"):
        _call("https://mixed.example/", allow_private=False, resolver=resolver)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/x", "file:///etc/passwd", "gopher://127.0.0.1:6379/", "javascript:alert(1)", "example.com/x"],
)
def test_bad_scheme_refused(url: str) -> None:
    with pytest.raises(HttpCallError, match=r"^refused: unsupported URL scheme"):
        _call(url)


@pytest.mark.parametrize("url", ["http:///path", "http://[::1/", "http://host:99999/"])
def test_malformed_url_refused(url: str) -> None:
    with pytest.raises(HttpCallError, match=r"^refused: "):
        _call(url)


def test_unsupported_method_and_body_refused(server: _RecordingServer) -> None:
    with pytest.raises(HttpCallError, match="unsupported HTTP method 'CONNECT'"):
        _call(f"{_base(server)}/echo", method="connect")
    with pytest.raises(HttpCallError, match="not JSON-serialisable"):
        _call(f"{_base(server)}/echo", body={"when": object()})
    assert server.received == []


# -- HTTPS with a pinned IP -------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=hooks.example",
            "-addext",
            "subjectAltName=DNS:hooks.example",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(tls_files: tuple[Path, Path]) -> Iterator[_RecordingServer]:
    cert, key = tls_files
    server = _RecordingServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    yield from _serve(server)


def test_https_pinned_ip_keeps_sni_and_certificate_check(
    tls_server: _RecordingServer, tls_files: tuple[Path, Path]
) -> None:
    port = tls_server.server_address[1]
    result = _call(
        f"https://hooks.example:{port}/echo",
        resolver=_resolver_for("127.0.0.1"),
        verify=str(tls_files[0]),
    )
    assert result["status"] == 200
    headers = {k.lower(): v for k, v in tls_server.received[-1]["headers"].items()}
    assert headers["host"] == f"hooks.example:{port}"


def test_https_certificate_for_other_name_rejected(tls_server: _RecordingServer, tls_files: tuple[Path, Path]) -> None:
    port = tls_server.server_address[1]
    with pytest.raises(HttpCallError, match=r"^TLS error with https://other\.example.*hostname"):
        _call(
            f"https://other.example:{port}/echo",
            resolver=_resolver_for("127.0.0.1"),
            verify=str(tls_files[0]),
        )
    assert tls_server.received == []

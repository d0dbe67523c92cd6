"""The web role's limit on request bodies (TICKWORK_MAX_REQUEST_BYTES), applied before a body is
read, and chunked bodies made readable.

Two places, because servers differ in when they call the application:

- daphne (twisted.web) receives the whole body, to memory or a temporary file, before it calls
  the application, so an ASGI middleware would see a 200 MiB upload only once it had been taken
  in. `BodyLimitedWebRequest` refuses it in daphne itself: as soon as the headers announce too
  large a Content-Length, or as soon as a chunked body has passed the limit.
- `RequestBodyLimit`, the ASGI middleware, does the same for servers that stream the body to
  the application (uvicorn, hypercorn), and gives a chunked body the Content-Length that Django
  needs: Django's ASGI request (and DRF after it) reads only as many bytes as CONTENT_LENGTH
  says, so without one a chunked POST was read as empty ("field required").

- `WSGIRequestBodyLimit`, the same for the WSGI side (scheduler_project/wsgi.py under gunicorn),
  which also streams the body and decodes a chunked one without giving it a CONTENT_LENGTH.

A refusal is 413 with a JSON body in the API's error shape (web/errors.py) and its
`X-Request-Id` (the request's own if valid, as web/middleware.py keeps it), before
authentication: a client without a token cannot make the server store or parse a large body either.
"""

import io
import json

from daphne import http_protocol
from django.conf import settings

from web.errors import error_body
from web.middleware import request_id_of

# After a refusal the client may still be sending; its bytes are read and dropped for a while, so
# that closing the connection does not reset it before the client has read the 413.
DRAIN_SECONDS = 5.0


def _limit() -> int:
    return settings.TICKWORK_MAX_REQUEST_BYTES


def _refusal(limit: int) -> bytes:
    detail = f"request body is over the limit of {limit} bytes (TICKWORK_MAX_REQUEST_BYTES)"
    return json.dumps(error_body(413, detail)).encode()


_LENGTH_NOT_A_NUMBER = json.dumps(error_body(400, "Content-Length is not a number")).encode()


class BodyLimitedWebRequest(http_protocol.WebRequest):
    """daphne's request, refusing a body over the limit as it arrives instead of storing it."""

    refused = False
    received = 0

    def gotLength(self, length):
        if length is not None and length > _limit():
            self._refuse()
        else:
            super().gotLength(length)

    def handleContentChunk(self, data):
        if self.refused:
            self.received += len(data)
            if self.received > 2 * _limit():  # a client that does not stop: stop reading
                self.channel.transport.abortConnection()
            return
        self.received += len(data)
        if self.received > _limit():
            self.content.close()
            self._refuse()
        else:
            super().handleContentChunk(data)

    def process(self):
        if not self.refused:
            return super().process()

    def _refuse(self) -> None:
        from twisted.internet import reactor  # daphne's, installed when daphne is imported

        self.refused = True
        self.content = io.BytesIO()
        # twisted answers `Expect: 100-continue` right after gotLength; the 413 is the answer.
        self.requestHeaders.removeHeader(b"expect")
        body = _refusal(_limit())
        given = self.requestHeaders.getRawHeaders(b"x-request-id")
        request_id = request_id_of(given[0].decode("latin-1") if given else None)
        transport = self.channel.transport
        transport.write(
            b"HTTP/1.1 413 Content Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n"
            b"X-Request-Id: " + request_id.encode() + b"\r\n"
            b"Connection: close\r\n\r\n" + body
        )
        # Half-close: the client reads the whole answer and the end of it, while what it still
        # sends is dropped (handleContentChunk) until it stops, or the drain time is over.
        if hasattr(transport, "loseWriteConnection"):
            transport.loseWriteConnection()
        else:
            transport.loseConnection()
        reactor.callLater(DRAIN_SECONDS, transport.abortConnection)  # type: ignore[arg-type]  # twisted's module-level reactor is mistyped


def limit_daphne_request_bodies() -> None:
    """Make daphne build BodyLimitedWebRequest for each request. daphne (pinned) names its request
    class in a module global that its HTTP factory reads for each connection; there is no option
    for it. Called from asgi.py, which daphne imports before it listens."""
    http_protocol.WebRequest = BodyLimitedWebRequest


class RequestBodyLimit:
    """ASGI middleware: refuse a body over the limit before reading it, and give a body that came
    without a Content-Length (chunked) one, after counting it against the limit."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = _limit()
        headers = [(name, value) for name, value in scope["headers"] if name.lower() != b"transfer-encoding"]
        length = next((value for name, value in headers if name.lower() == b"content-length"), None)
        if length is not None:
            if not length.strip().isdigit():
                return await _answer(scope, send, 400, _LENGTH_NOT_A_NUMBER)
            if int(length) > limit:
                return await _answer(scope, send, 413, _refusal(limit))
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                return await _answer(scope, send, 413, _refusal(limit))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay():
            return pending.pop() if pending else await receive()

        scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        return await self.app(scope, replay, send)


async def _answer(scope, send, status: int, body: bytes) -> None:
    given = next((value for name, value in scope["headers"] if name.lower() == b"x-request-id"), None)
    request_id = request_id_of(given.decode("latin-1") if given is not None else None)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", request_id.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class WSGIRequestBodyLimit:
    """WSGI middleware: as RequestBodyLimit. A refusal closes the connection (`Connection:
    close`), so the server does not read the rest of the body to keep it alive."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        limit = _limit()
        length = environ.get("CONTENT_LENGTH")
        if length:
            if not length.strip().isdigit():
                return _wsgi_answer(environ, start_response, "400 Bad Request", _LENGTH_NOT_A_NUMBER)
            if int(length) > limit:
                return _wsgi_answer(environ, start_response, "413 Request Entity Too Large", _refusal(limit))
            return self.app(environ, start_response)
        if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(limit + 1)  # the server decodes the chunks, up to this many
        if len(body) > limit:
            return _wsgi_answer(environ, start_response, "413 Request Entity Too Large", _refusal(limit))
        return self.app({**environ, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}, start_response)


def _wsgi_answer(environ, start_response, status: str, body: bytes) -> list[bytes]:
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Request-Id", request_id_of(environ.get("HTTP_X_REQUEST_ID"))),
            ("Connection", "close"),
        ],
    )
    return [body]

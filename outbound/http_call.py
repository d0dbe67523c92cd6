"""An outbound HTTP call: the ``http`` job handler's (worker/handlers.py) and alert webhooks'
(alerts/delivery.py), on a floor of its own below both, above `tenants` (its signing scheme).

Tenants configure arbitrary URLs, so this is an SSRF surface: a job pointed at
``http://169.254.169.254/`` or ``http://10.0.0.5:6379/`` would otherwise let a tenant read cloud
credentials or poke internal services from inside our network. The defence is: resolve the host
once, refuse if *any* address is non-public, then connect to exactly the address we checked,
never following redirects (a redirect is a second, unchecked request).

Pure Python (no Django) so it can be tested against a local server and reused outside the worker.
"""

from __future__ import annotations

import codecs
import ipaddress
import json
import socket
import time
from collections.abc import Callable, Sequence
from email.message import Message
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

import idna
import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError

# One implementation of the signature for what we send and what webhooks send us.
from tenants.signing import SIGNATURE_HEADER, sign, sign_with

__all__ = [
    "IDEMPOTENCY_HEADER",
    "MAX_RESPONSE_BYTES",
    "SIGNATURE_HEADER",
    "HttpCallError",
    "check_url",
    "perform_request",
    "sign",
]

IDEMPOTENCY_HEADER = "Idempotency-Key"
# Results are stored on the execution row; an unbounded body would let one chatty endpoint bloat
# the database (and the worker's memory).
MAX_RESPONSE_BYTES = 64 * 1024
ERROR_BODY_CHARS = 500

# Everything else (CONNECT, TRACE, made-up verbs) has no business being sent to a webhook and
# mostly serves to probe proxies.
ALLOWED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 6052 well-known NAT64 prefix: a NAT64 gateway forwards 64:ff9b::a.b.c.d to IPv4 a.b.c.d,
# so the embedded address is what is really reached.
_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
_READ_CHUNK = 8192

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Same shape as socket.getaddrinfo so tests (and callers with their own DNS policy) can substitute it.
Resolver = Callable[..., Sequence[tuple[Any, ...]]]


class HttpCallError(Exception):
    """The call failed; the message is meant for the execution log as-is."""


def perform_request(
    *,
    method: str = "POST",
    url: str,
    headers: dict[str, str] | None = None,
    body: object = None,
    secrets: Sequence[str],
    timeout: float,
    allow_private: bool = False,
    idempotency_key: str,
    resolver: Resolver = socket.getaddrinfo,
    verify: bool | str = True,
) -> dict[str, Any]:
    """Send one signed webhook request and return ``{"status", "body"}``, its
    ``X-Tickwork-Signature`` with a ``v1=`` per secret of ``secrets`` (two
    while a rotation of the tenant's secret settles).

    ``timeout`` is an overall budget in seconds covering connecting (to
    every candidate address) and reading the response body. ``verify`` is
    passed to requests (CA bundle path); it exists for receivers behind a
    private CA and for tests. Raises HttpCallError for anything that is not
    a 2xx response.
    """
    method = (method or "POST").upper()
    if method not in ALLOWED_METHODS:
        raise HttpCallError(f"refused: unsupported HTTP method {method!r}")
    if not timeout or timeout <= 0:
        raise HttpCallError(f"timeout must be positive, got {timeout!r}")

    parts, host, port = _parse_url(url)
    shown_url = _display_url(parts)
    addresses = _resolve(host, port, resolver)
    if not allow_private:
        for ip in addresses:
            reason = _refusal_reason(ip)
            if reason is not None:
                via = "" if str(ip) == host else f" ({host} resolves to it)"
                raise HttpCallError(f"refused: {ip} is {reason}{via}")

    payload, content_type = _encode_body(body)
    # str(): header maps come from tenant JSON, where {"X-Retry": 3} is easy to write and requests
    # would reject the int at send time.
    merged: CaseInsensitiveDict[str] = CaseInsensitiveDict({str(k): str(v) for k, v in (headers or {}).items()})
    if content_type is not None:
        # setdefault: a tenant sending e.g. application/vnd.api+json keeps it.
        merged.setdefault("Content-Type", content_type)
    # Ours win over tenant-supplied values: receivers rely on them for de-duplication and
    # authenticity, so they must not be spoofable.
    merged[IDEMPOTENCY_HEADER] = str(idempotency_key)
    merged[SIGNATURE_HEADER] = sign_with(secrets, int(time.time()), payload)
    # We connect to an IP literal, so requests would otherwise send the IP.
    merged["Host"] = _host_header(host, parts)

    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    for ip in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HttpCallError(f"timeout after {timeout}s: {method} {shown_url}")
        try:
            status, headers_in, raw, truncated = _send_pinned(
                method=method,
                parts=parts,
                host=host,
                ip=ip,
                port=port,
                headers=merged,
                payload=payload,
                timeout=remaining,
                deadline=deadline,
                verify=verify,
            )
        except _ConnectFailedError as exc:
            # Nothing was sent, so trying the next address can't duplicate
            # the call (mirrors what a normal client does with multiple A/AAAA
            # records, e.g. "localhost" -> ::1 then 127.0.0.1).
            last_error = exc.__cause__
            continue
        except _DeadlineError:
            raise HttpCallError(f"timeout after {timeout}s: {method} {shown_url}") from None
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            # urllib3 errors escape from reading response.raw directly.
            raise _translate(exc, method, shown_url, timeout) from exc
        return _build_result(status, headers_in, raw, truncated, shown_url)

    if last_error is None:  # Unreachable: _resolve never returns an empty list.
        raise HttpCallError(f"no address to connect to for {shown_url}")
    if isinstance(last_error, requests.Timeout):
        raise HttpCallError(f"timeout after {timeout}s: {method} {shown_url}") from last_error
    raise HttpCallError(f"connection failed to {shown_url}: {_root_message(last_error)}") from last_error


# -- URL / address handling -------------------------------------------------


def check_url(url: str) -> None:
    """Raise HttpCallError if `url` could never be called (scheme, host, port). Whether its
    host is public is decided when it is called: DNS may answer differently by then."""
    _parse_url(url)


def _parse_url(url: str) -> tuple[SplitResult, str, int]:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise HttpCallError(f"refused: invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise HttpCallError(f"refused: unsupported URL scheme {parts.scheme!r} (only http and https)")
    if not parts.hostname:
        raise HttpCallError(f"refused: URL has no host: {url!r}")
    try:
        host = _ascii_host(parts.hostname)
    except (idna.IDNAError, UnicodeError) as exc:
        raise HttpCallError(f"refused: invalid hostname {parts.hostname!r}: {exc}") from None
    return parts._replace(scheme=scheme), host, port or _DEFAULT_PORTS[scheme]


def _ascii_host(hostname: str) -> str:
    if hostname.isascii():
        return hostname
    # Same IDNA 2008 / UTS46 encoding requests applies, so the Host header, SNI and certificate
    # check all see the name the tenant meant.
    return idna.encode(hostname, uts46=True).decode("ascii")


def _display_url(parts: SplitResult) -> str:
    # Error messages end up in execution logs; keep credentials out of them.
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc))


def _host_header(host: str, parts: SplitResult) -> str:
    literal = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != _DEFAULT_PORTS[parts.scheme]:
        return f"{literal}:{parts.port}"
    return literal


def _resolve(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        # A literal needs no lookup, and skipping the resolver keeps
        # "http://10.0.0.5/" from depending on DNS configuration.
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = resolver(host, port, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise HttpCallError(f"DNS resolution failed for {host}: {exc}") from None
    addresses: list[IPAddress] = []
    for info in infos:
        try:
            ip = ipaddress.ip_address(info[4][0])
        except ValueError:
            raise HttpCallError(f"DNS resolution failed for {host}: bad address {info[4][0]!r}") from None
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise HttpCallError(f"DNS resolution failed for {host}: no addresses")
    return addresses


def _refusal_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be contacted ("a private address"), or None."""
    if isinstance(ip, ipaddress.IPv6Address):
        # These IPv6 forms deliver packets to an embedded IPv4 address, and
        # ipaddress's flags don't consistently look through them (it varies
        # by Python version), so judge the IPv4 address actually reached.
        if ip.ipv4_mapped is not None:
            # The socket talks plain IPv4 to the embedded address, so that
            # alone decides (the ::ffff:0:0/96 wrapper itself counts as
            # "reserved", which would refuse public targets for no reason).
            inner = _address_kind(ip.ipv4_mapped)
            if inner is None:
                return None
            return f"an IPv4-mapped {inner} address ({ip.ipv4_mapped})"
        nat64 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64_PREFIX else None
        for label, v4 in (("6to4", ip.sixtofour), ("NAT64", nat64)):
            if v4 is not None:
                inner = _address_kind(v4)
                if inner is not None:
                    return f"a {label} {inner} address ({v4})"
    kind = _address_kind(ip)
    return None if kind is None else f"{_article(kind)} {kind} address"


def _address_kind(ip: IPAddress) -> str | None:
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        # Catches ranges that are none of the above but still not reachable
        # on the internet, notably 100.64.0.0/10 (carrier-grade NAT), which
        # some clouds use for metadata services (Alibaba: 100.100.100.200).
        ("non-global", not ip.is_global),
    )
    return next((kind for kind, hit in checks if hit), None)


def _article(word: str) -> str:
    return "an" if word[0] in "aeiu" else "a"


def _pinned_netloc(parts: SplitResult, ip: IPAddress, port: int) -> str:
    # Keep userinfo: requests turns it into Basic auth.
    userinfo = parts.netloc.rpartition("@")[0]
    prefix = f"{userinfo}@" if userinfo else ""
    if isinstance(ip, ipaddress.IPv6Address):
        # A zone id ("fe80::1%eth0") must be percent-encoded inside a URL.
        literal = f"[{str(ip).replace('%', '%25')}]"
    else:
        literal = str(ip)
    return f"{prefix}{literal}:{port}"


# -- sending ----------------------------------------------------------------


def _encode_body(body: object) -> tuple[bytes, str | None]:
    if body is None:
        return b"", None
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(body, bytes):
        return body, None
    if isinstance(body, dict | list):
        try:
            # Encode once, here, so the bytes we sign are the bytes we send.
            encoded = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise HttpCallError(f"body is not JSON-serialisable: {exc}") from None
        return encoded.encode("utf-8"), "application/json"
    raise HttpCallError(f"unsupported body type {type(body).__name__}")


class _PinnedTLSAdapter(HTTPAdapter):
    """Adapter for a URL rewritten to an IP literal that still does TLS as
    the original hostname: SNI carries the name and the certificate is
    verified against it, so pinning the IP costs no security.
    """

    def __init__(self, hostname: str) -> None:
        # Set before super().__init__(), which calls init_poolmanager.
        self._tls_hostname = hostname
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **pool_kwargs: Any) -> None:
        pool_kwargs["server_hostname"] = self._tls_hostname
        pool_kwargs["assert_hostname"] = self._tls_hostname
        super().init_poolmanager(*args, **pool_kwargs)


class _ConnectFailedError(Exception):
    """No connection was established (so nothing was sent); see __cause__."""


class _DeadlineError(Exception):
    """The overall timeout ran out while reading the body."""


def _send_pinned(
    *,
    method: str,
    parts: SplitResult,
    host: str,
    ip: IPAddress,
    port: int,
    headers: CaseInsensitiveDict[str],
    payload: bytes,
    timeout: float,
    deadline: float,
    verify: bool | str,
) -> tuple[int, CaseInsensitiveDict[str], bytes, bool]:
    pinned_url = urlunsplit(parts._replace(netloc=_pinned_netloc(parts, ip, port)))
    # A throwaway session: the adapter is specific to this hostname, and a
    # shared pool could hand us a keep-alive connection to another address.
    with requests.Session() as session:
        # No proxies or .netrc from the environment: a proxy would resolve
        # the hostname itself, bypassing the address check entirely.
        session.trust_env = False
        if parts.scheme == "https":
            session.mount("https://", _PinnedTLSAdapter(host))
        else:
            session.mount("http://", HTTPAdapter(max_retries=0))
        try:
            response = session.request(
                method,
                pinned_url,
                headers=dict(headers),
                data=payload,
                timeout=(timeout, timeout),
                allow_redirects=False,
                stream=True,
                verify=verify,
            )
        except requests.ConnectTimeout as exc:
            raise _ConnectFailedError() from exc
        except requests.ConnectionError as exc:
            if _is_connect_refusal(exc):
                raise _ConnectFailedError() from exc
            raise
        with response:
            raw, truncated = _read_capped(response, deadline)
            return response.status_code, response.headers, raw, truncated


def _is_connect_refusal(exc: requests.ConnectionError) -> bool:
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError)


def _read_capped(response: requests.Response, deadline: float) -> tuple[bytes, bool]:
    """Read the body, keeping at most MAX_RESPONSE_BYTES; also say if cut.

    Streaming instead of ``response.content`` means a huge (or endless) body
    is cut off rather than buffered. requests' timeout only bounds each
    socket read, so the deadline check stops a server trickling bytes from
    holding the worker forever (worst case: deadline + one read timeout).
    read1() rather than iter_content(): the latter blocks until a whole
    chunk arrives, so a trickle never reaches the check. A server trickling
    *headers* is still only bounded per read (a known limit).
    """
    buf = bytearray()
    while True:
        chunk = response.raw.read1(_READ_CHUNK, decode_content=True)
        if not chunk:
            return bytes(buf), False
        buf += chunk
        if len(buf) > MAX_RESPONSE_BYTES:
            return bytes(buf[:MAX_RESPONSE_BYTES]), True
        if time.monotonic() > deadline:
            raise _DeadlineError()


# -- results and errors -----------------------------------------------------


def _build_result(
    status: int,
    headers: CaseInsensitiveDict[str],
    raw: bytes,
    truncated: bool,
    shown_url: str,
) -> dict[str, Any]:
    content_type = Message()
    content_type["Content-Type"] = headers.get("Content-Type", "")
    media_type = content_type.get_content_type()
    text = _decode(raw, content_type.get_content_charset(), final=not truncated)

    if 200 <= status < 300:
        result_body: Any = text
        is_json = media_type == "application/json" or media_type.endswith("+json")
        # A truncated document can't parse; the caller still gets the text.
        if is_json and text and not truncated:
            try:
                result_body = json.loads(text)
            except ValueError:
                pass  # Mislabelled content type: keep the raw text.
        return {"status": status, "body": result_body}

    message = f"HTTP {status} from {shown_url}"
    if 300 <= status < 400:
        location = headers.get("Location")
        # Following it would be a fresh request to an unchecked address.
        message += f" (redirect to {location} not followed)" if location else " (redirect not followed)"
    snippet = text[:ERROR_BODY_CHARS].strip()
    if snippet:
        message += f": {snippet}"
    raise HttpCallError(message)


def _decode(raw: bytes, charset: str | None, *, final: bool) -> str:
    # Default UTF-8 rather than requests' ISO-8859-1 for text/*: webhook
    # receivers overwhelmingly send UTF-8 without declaring it.
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # final=False after truncation drops a multi-byte character cut in half instead of rendering it as U+FFFD.
    return decoder.decode(raw, final=final)


def _translate(exc: Exception, method: str, shown_url: str, timeout: float) -> HttpCallError:
    if _is_timeout(exc):
        return HttpCallError(f"timeout after {timeout}s: {method} {shown_url}")
    if isinstance(exc, requests.exceptions.SSLError):
        return HttpCallError(f"TLS error with {shown_url}: {_root_message(exc)}")
    if isinstance(exc, requests.ConnectionError | urllib3.exceptions.ProtocolError):
        return HttpCallError(f"connection error with {shown_url}: {_root_message(exc)}")
    return HttpCallError(f"request to {shown_url} failed: {_root_message(exc)}")


def _is_timeout(exc: BaseException) -> bool:
    # Timeouts arrive wrapped in several layers (requests -> MaxRetryError -> urllib3 timeout ->
    # socket.timeout), so look at the whole chain.
    for err in _chain(exc):
        if isinstance(err, requests.Timeout | ReadTimeoutError | socket.timeout):
            return True
        if isinstance(err, ConnectTimeoutError) and not isinstance(err, NewConnectionError):
            return True
    return False


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        reason = getattr(current, "reason", None)  # urllib3 MaxRetryError
        if isinstance(reason, BaseException):
            current = reason
        elif current.args and isinstance(current.args[0], BaseException):
            current = current.args[0]
        else:
            current = current.__cause__ or current.__context__
    return seen


def _root_message(exc: BaseException) -> str:
    # urllib3's outer messages embed object reprs and retry noise; the
    # innermost error ("[Errno 111] Connection refused") is what's useful.
    root = _chain(exc)[-1]
    return str(root) or type(root).__name__

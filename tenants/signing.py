"""The `X-Tickwork-Signature` scheme, both ways: the `http` handler signs what it sends with the
tenant's signing secret (outbound/http_call.py), and an inbound webhook is verified with the
tenant's inbound secret (events/hooks.py).

`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` (Stripe's scheme): the timestamp is
inside the MAC, so a receiver can refuse a captured request replayed later, not only a tampered
one. A header may carry several `v1=` values, one per secret, so that a sender can sign with an
old and a new secret while a rotation settles.

Pure Python (no Django): the worker's HTTP code uses it outside a request.
"""

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SIGNATURE_HEADER = "X-Tickwork-Signature"
SCHEME = "v1"
# How far the signed time may be from the receiver's, either way: enough for clock skew and a
# slow delivery, little enough that a replay must be prompt.
TOLERANCE_SECONDS = 300
# A header larger than this is not a signature; refused before it is parsed.
MAX_HEADER_LENGTH = 2048


def digest(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<body>` with `secret`."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Tickwork-Signature` header's value for `body` sent at `timestamp`: `t=<ts>,v1=<hex>`."""
    return sign_with([secret], timestamp, body)


def sign_with(secrets: Sequence[str], timestamp: int, body: bytes) -> str:
    """The header's value with a `v1=` per secret, in their order (`t=<ts>,v1=<new>,v1=<old>`
    while a rotation settles): a receiver verifies if any one is its secret's."""
    return ",".join([f"t={timestamp}", *(f"{SCHEME}={digest(secret, timestamp, body)}" for secret in secrets)])


@dataclass(frozen=True)
class Signature:
    timestamp: int
    digests: tuple[str, ...]  # every v1= value, in the order given


def parse(header: str | None) -> Signature | None:
    """The header's timestamp and v1 digests; None when it is missing or malformed (no `t`, a
    `t` that is not a whole number, no `v1`). Other schemes' elements are ignored, as a receiver
    of a newer sender should."""
    if not header or len(header) > MAX_HEADER_LENGTH:
        return None
    timestamp: int | None = None
    digests: list[str] = []
    for element in header.split(","):
        key, sep, value = element.strip().partition("=")
        if not sep:
            return None
        if key == "t":
            if timestamp is not None or not value.isascii() or not value.isdigit():
                return None
            timestamp = int(value)
        elif key == SCHEME:
            digests.append(value.strip())
    if timestamp is None or not digests:
        return None
    return Signature(timestamp, tuple(digests))


def verify(header: str | None, body: bytes, *, secrets: Iterable[str], now: float) -> bool:
    """Whether `header` signs `body` with one of `secrets`, at a time within TOLERANCE_SECONDS of
    `now` (unix seconds). Every digest is compared with every secret's in constant time, and all of
    them are compared, so the answer's timing says nothing of which one matched."""
    signature = parse(header)
    if signature is None or abs(now - signature.timestamp) > TOLERANCE_SECONDS:
        return False
    expected = [digest(secret, signature.timestamp, body) for secret in secrets if secret]
    matched = False
    for given in signature.digests:
        for want in expected:
            matched |= hmac.compare_digest(given.encode(), want.encode())
    return matched

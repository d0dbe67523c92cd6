"""The X-Tickwork-Signature scheme, shared by the `http` handler (signing) and webhooks (verifying)."""

import hashlib
import hmac

import pytest

from tenants import signing

BODY = b'{"invoice":"in_1","currency":"EUR"}'
NOW = 1_800_000_000


def test_sign_is_hmac_sha256_over_timestamp_dot_body():
    expected = hmac.new(b"s3cret", f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert signing.sign("s3cret", NOW, BODY) == f"t={NOW},v1={expected}"


def test_a_signature_verifies_with_its_secret_within_five_minutes_either_way():
    for skew in (0, -300, 300):
        header = signing.sign("s3cret", NOW + skew, BODY)
        assert signing.verify(header, BODY, secrets=["s3cret"], now=NOW)


@pytest.mark.parametrize("skew", [-301, 301, -86400])
def test_a_stale_or_future_signature_does_not_verify(skew):
    header = signing.sign("s3cret", NOW + skew, BODY)
    assert not signing.verify(header, BODY, secrets=["s3cret"], now=NOW)


def test_another_secret_or_body_does_not_verify():
    header = signing.sign("s3cret", NOW, BODY)
    assert not signing.verify(header, BODY, secrets=["other"], now=NOW)
    assert not signing.verify(header, BODY + b" ", secrets=["s3cret"], now=NOW)
    assert not signing.verify(header, BODY, secrets=[], now=NOW)
    assert not signing.verify(header, BODY, secrets=[""], now=NOW)


def test_any_of_several_v1_values_and_any_of_several_secrets_will_do():
    good = signing.digest("new", NOW, BODY)
    header = f"t={NOW},v1={'0' * 64},v1={good}"
    assert signing.verify(header, BODY, secrets=["old", "new"], now=NOW)
    assert signing.verify(header, BODY, secrets=["new"], now=NOW)
    assert not signing.verify(header, BODY, secrets=["old"], now=NOW)


def test_unknown_schemes_are_ignored():
    header = f"t={NOW},v0=whatever,v1={signing.digest('s3cret', NOW, BODY)}"
    assert signing.verify(header, BODY, secrets=["s3cret"], now=NOW)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "v1=abc",
        f"t={NOW}",
        f"t=,v1={'a' * 64}",
        f"t=soon,v1={'a' * 64}",
        f"t=-5,v1={'a' * 64}",
        f"t={NOW},t={NOW},v1={'a' * 64}",
        f"t={NOW};v1={'a' * 64}",
        "garbage",
        "t=١٢٣,v1=ab",  # digits, but not ASCII ones
        "t=1," + "v1=a," * 1000,
    ],
)
def test_a_malformed_header_is_refused(header):
    assert signing.parse(header) is None
    assert not signing.verify(header, BODY, secrets=["s3cret"], now=NOW)

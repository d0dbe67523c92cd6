"""The error fingerprint (executions/fingerprints.py): stable, masks what varies between
occurrences of one failure, keeps what tells two failures apart."""

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from executions.fingerprints import exception_type, fingerprint, masked

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=12)
exception_names = st.from_regex(r"[A-Z][a-z]{2,10}(Error|Exception|Failure)", fullmatch=True)
# What varies from one occurrence to the next, by kind: two occurrences of one failure differ
# in the values, not in their kind (a quoted key, a number, an id).
KINDS = [
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9).map(lambda f: f"{f:.3f}"),
    st.uuids().map(str),
    st.uuids().map(lambda u: u.hex),
    st.binary(min_size=4, max_size=16).map(lambda b: "0x" + b.hex()),
    st.text(alphabet=st.characters(blacklist_characters="'\\\n\r", blacklist_categories=("Cs",)), max_size=20).map(
        lambda s: f"'{s}'"
    ),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC)).map(
        lambda d: d.isoformat().replace("+00:00", "Z")
    ),
    st.tuples(*[st.integers(0, 255)] * 4, st.integers(1, 65535)).map(lambda t: "{}.{}.{}.{}:{}".format(*t)),
]
variables = st.one_of(*KINDS)


@st.composite
def errors(draw):
    """An error as a worker records it: "Type: words {value} words"."""
    name = draw(exception_names)
    before = draw(st.lists(words, min_size=1, max_size=4))
    after = draw(st.lists(words, max_size=3))
    return name, before, after


def render(parts, value: str) -> str:
    name, before, after = parts
    return f"{name}: {' '.join(before)} {value} {' '.join(after)}".rstrip()


@given(errors())
def test_the_fingerprint_is_a_function_of_the_text(parts):
    """Stable: the same error gives the same key every time, a fixed-width hex string."""
    error = render(parts, "42")
    assert fingerprint(error) == fingerprint(error)
    assert len(fingerprint(error)) == 16
    int(fingerprint(error), 16)


@given(errors(), st.sampled_from(KINDS).flatmap(lambda kind: st.tuples(kind, kind)))
def test_what_varies_is_masked(parts, values):
    """Two occurrences that differ only in a number, id, hex, quoted value, time or address
    share a fingerprint."""
    one, other = values
    assert fingerprint(render(parts, one)) == fingerprint(render(parts, other))


@given(errors(), words, variables)
def test_the_words_and_the_type_are_kept(parts, word, value):
    """Errors that differ in a word of the message, or in the exception's type, do not share one."""
    name, before, after = parts
    changed_word = (name, [*before, word + "x"], after)
    assert fingerprint(render(parts, value)) != fingerprint(render(changed_word, value))
    other_type = ("Other" + name, before, after)
    assert fingerprint(render(parts, value)) != fingerprint(render(other_type, value))
    assert exception_type(render(parts, value)) == name


@given(errors(), st.text(max_size=200))
def test_only_the_first_line_counts(parts, body):
    """A message's later lines (a response body, a dump) do not split a group."""
    error = render(parts, "7")
    assert fingerprint(error + "\n" + body) == fingerprint(error)


@given(st.text(max_size=2000))
def test_any_text_has_a_fingerprint(text):
    """Whatever a handler raised, the fingerprint is computed (blank text has none)."""
    key = fingerprint(text)
    assert key == "" if not text.strip() else len(key) == 16


def test_what_an_operator_reads():
    assert masked("HandlerFailure: upstream answered 503") == "HandlerFailure: upstream answered <n>"
    assert masked(f"KeyError: 'user-{uuid.uuid4()}'") == "KeyError: <str>"
    assert (
        masked(f"ValueError: job {uuid.uuid4()} failed at 2026-11-26T07:30:45Z on 10.0.0.1:5432 (0xdeadbeef)")
        == "ValueError: job <id> failed at <time> on <ip> (<hex>)"
    )
    assert masked("Traceback …\n  line 2") == "Traceback …"
    assert exception_type("worker lost: lease expired without a heartbeat") == ""


@pytest.mark.django_db
def test_the_migration_fingerprints_the_dead_rows_that_exist(tenant, make_job, drive):
    """Migration 0011 fills in the fingerprint of DEAD rows written before it (and only theirs)."""
    from importlib import import_module

    from django.apps import apps

    from executions.models import Execution

    migration = import_module("executions.migrations.0011_error_fingerprint_discarded_activity")
    dead = drive(make_job(tenant, handler="fail").executions.get(), "DEAD")
    done = drive(make_job(tenant).executions.get(), "SUCCEEDED")
    Execution.objects.filter(pk=dead.pk).update(error="KeyError: 'k-1'", error_fingerprint="")
    Execution.objects.filter(pk=done.pk).update(error="a note", error_fingerprint="")

    migration.backfill_dead_fingerprints(apps, None)

    assert Execution.objects.get(pk=dead.pk).error_fingerprint == fingerprint("KeyError: 'k-2'")
    assert Execution.objects.get(pk=done.pk).error_fingerprint == ""

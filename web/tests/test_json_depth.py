"""The nesting check's quick measure (web/json_input.py `_depth`) finds what the walk over the
document's tokens finds, for JSON and for text that is not: strings skipped whole, escapes and
all. Pure: no database."""

import json

from hypothesis import given
from hypothesis import strategies as st

from web.json_input import _TOKENS, _depth, _too_deep, field_errors, may_hold_unstorable


def _walked(text: str) -> int:
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] != '"':
            depth += 1 if token in "[{" else -1
            deepest = max(deepest, depth)
    return deepest


TEXTS = st.text(alphabet=st.sampled_from('[]{}"\\:,ab \u00e9'), max_size=60)
DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('[]{}"\\ab\u00e9\x00'), max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=30,
)


@given(TEXTS)
def test_any_text_measures_as_its_tokens_walk(text):
    assert _depth(text) == _walked(text)


@given(DOCUMENTS, st.booleans())
def test_a_document_measures_as_its_tokens_walk(document, ascii_only):
    text = json.dumps({"field": document}, ensure_ascii=ascii_only)
    assert _depth(text) == _walked(text)
    assert (_too_deep(text, 3) is None) == (_walked(text) <= 3)


@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(allow_nan=True),
            st.text(),
            st.sampled_from(["\x00", "\ud800", "a\udfffb", "\\u0000", "😀"]),
        ),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=12,
    )
)
def test_a_document_said_storable_holds_nothing_field_errors_refuses(value):
    # json.dumps writes NaN, infinities and lone surrogates as json.loads reads them back.
    text = json.dumps({"jobs": [{"payload": value}]}, ensure_ascii=False, allow_nan=True)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps({"jobs": [{"payload": value}]}, allow_nan=True)
    parsed = json.loads(text)
    if not may_hold_unstorable(text):
        assert field_errors(parsed["jobs"][0]) == {}
    if field_errors(parsed["jobs"][0]):
        assert may_hold_unstorable(text)


def test_big_numbers_and_escapes_are_looked_at():
    for text in ['{"a":1e400}', '{"a":-1e309}', '{"a":"\\u0000"}', '{"a":"\\uDC00"}', '{"a":NaN}', '{"\\ud800":1}']:
        assert may_hold_unstorable(text), text
    assert not may_hold_unstorable('{"a":[1.5,"\\u00e9 \\ud83d\\ude00",12345678901234567890123]}')

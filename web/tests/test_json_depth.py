"""The nesting check's quick measure (web/json_input.py `_depth`) finds what the walk over the
document's tokens finds, for JSON and for text that is not: strings skipped whole, escapes and
all. Pure: no database."""

import json

from hypothesis import given
from hypothesis import strategies as st

from web.json_input import _TOKENS, _depth, _too_deep


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

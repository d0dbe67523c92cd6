"""What JSON from a client may hold before a serializer or the database sees it.

PostgreSQL stores no NUL character in text or jsonb, and no lone UTF-16 surrogate (JSON's
`\\ud800` escape makes one); Python's json module recurses once per level of nesting, so a
deeply nested document raises RecursionError; and a number too big for a float parses as
infinity, which JSON cannot represent on the way out. Each of these would surface as a 500,
or a half-written job, if it got past the request's parsing. Here each is a 400 naming the
field, before anything is validated or written. The API's parser and the dashboard's job form
both parse through `loads`.
"""

import itertools
import json
import math
import re
from collections.abc import Callable
from typing import Any

import orjson

# Levels of nesting allowed inside one field's value ({"a": {"b": 1}} is 2). Real payloads
# nest a handful of levels; this leaves room for them and none for a recursion bomb.
MAX_DEPTH = 32

# A JSON string (escapes included) or a bracket: enough to measure nesting without parsing.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKENS = re.compile(_STRING + r"|[\[\]{}]")
_STRINGS = re.compile(_STRING)
# A bracket's step in depth; every other character is dropped.
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JSONInputError(ValueError):
    """JSON that parses but cannot be accepted; `field` names where it is."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def printable(text: str) -> str:
    """`text` with unstorable characters written as JSON escapes, safe to echo in a response."""
    return _UNSTORABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def loads(text: str, *, field: str | None = None, parse_constant: Callable | None = None) -> Any:
    """Parse `text`, refusing too deep nesting, unstorable strings and non-finite numbers.

    With `field`, the whole document is that field's value (the dashboard's payload box);
    without, it is a request body whose top-level keys name the fields.
    """
    limit = MAX_DEPTH if field is not None else MAX_DEPTH + 1
    deep_field = _too_deep(text, limit)
    if deep_field is not None:
        raise JSONInputError(field or deep_field, f"is nested deeper than {MAX_DEPTH} levels")
    data = json.loads(text, parse_constant=parse_constant)
    if field is not None:
        _check_value(data, field)
    elif isinstance(data, dict):
        for key, value in data.items():
            name = printable(key)
            if name != key:
                raise JSONInputError(name, _unstorable_message(key, "the field's name"))
            _check_value(value, name)
    return data


# A batch body, {"jobs": [{...}, ...]}: its list and its items are two levels of its own.
BATCH_NESTING = 2


def loads_batch(text: str, *, parse_constant: Callable | None = None) -> Any:
    """Parse a batch request body, whose top-level field is a list of request bodies. Its
    nesting is measured as `loads` measures a request body's, plus the batch's own two levels, so
    an item's fields nest as deep as a single request's may. What cannot be stored is left to
    `field_errors`, item by item, so that a batch's answer can name every bad item."""
    deep_field = _too_deep(text, MAX_DEPTH + 1 + BATCH_NESTING)
    if deep_field is not None:
        raise JSONInputError(deep_field, f"has an item nested deeper than {MAX_DEPTH} levels")
    data = json.loads(text, parse_constant=parse_constant)
    if isinstance(data, dict):
        for key in data:
            if printable(key) != key:
                raise JSONInputError(printable(key), _unstorable_message(key, "the field's name"))
    return data


def may_hold_unstorable(text: str) -> bool:
    """Whether the JSON document `text` may hold a value `field_errors` refuses: when not, no
    item of it needs that walk (a tenth of a 1,000-job batch's validation, profiled). orjson
    refuses to parse a lone surrogate (escaped or not) and a number too large for a float, which
    json parses to infinity; a NUL is in the text as itself or as its one escape. Any other
    reason orjson has to refuse the text (its own depth limit) is answered "may": the walk."""
    if "\x00" in text or "\\u0000" in text:
        return True
    try:
        orjson.loads(text)
    except ValueError:  # orjson's JSONDecodeError, or a str it cannot encode
        return True
    return False


def field_errors(data: dict) -> dict[str, list[str]]:
    """Why each top-level field of a parsed request body cannot be stored ({} when all can):
    the checks `loads` makes, for a body that came inside a batch."""
    errors: dict[str, list[str]] = {}
    for key, value in data.items():
        name = printable(key)
        if name != key:
            errors[name] = [_unstorable_message(key, "the field's name")]
            continue
        try:
            _check_value(value, name)
        except JSONInputError as exc:
            errors[name] = [exc.message]
    return errors


def _too_deep(text: str, limit: int) -> str | None:
    """The top-level key whose value nests deeper than `limit` (counting the document's own
    brackets), "" when the document itself does, None when nothing does. Strings are skipped
    whole, so brackets inside them do not count."""
    if _depth(text) <= limit:
        return None  # the common case, measured without a step of Python per token
    depth = 0
    key = ""
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            # At depth 1 the last string before a bracket is that value's key.
            if depth == 1:
                key = token
        elif token in "[{":
            depth += 1
            if depth > limit:
                return _decode_key(key)
        else:
            depth -= 1
    return None


def _depth(text: str) -> int:
    """How deep the document's brackets nest, outside its strings: what _too_deep's walk finds,
    by the regular expression and C loops (the walk was 3.5 ms of a 1,000-job batch's body)."""
    if "\\" in text or text.count('"') % 2:
        outside = _STRINGS.sub("", text)  # an escape may hide a quote: the strings matched whole
    else:
        outside = "".join(text.split('"')[::2])  # each string is between a quote and the next
    brackets = _NOT_BRACKETS.sub("", outside)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=0))


def _decode_key(token: str) -> str:
    if not token:
        return ""
    try:
        return printable(json.loads(token))
    except ValueError:
        return token[1:-1]


def _check_value(value: Any, field: str) -> None:
    # Iterative: the depth is already bounded, but there is no reason to spend the stack.
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                raise JSONInputError(field, _unstorable_message(item, f"the text at {path}"))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JSONInputError(field, f"has a number at {path} too large to store")
        elif isinstance(item, dict):
            for key, child in item.items():
                if _UNSTORABLE.search(key):
                    raise JSONInputError(field, _unstorable_message(key, f"a key in {path}"))
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))


def _unstorable_message(text: str, where: str) -> str:
    found = _UNSTORABLE.search(text)
    assert found is not None  # called only for text in which it was found
    char = found.group()
    kind = "a NUL character" if char == "\x00" else "a lone surrogate (half of a UTF-16 pair)"
    return f"{where} contains {kind}, \\u{ord(char):04x}, which cannot be stored"

"""A JSON answer written by orjson, byte for byte what DRF's JSONRenderer writes.

DRF's renderer is `json.dumps` with its encoder (compact, UTF-8, U+2028/U+2029 escaped): for a
`POST /v1/jobs/bulk` answer of 1,000 jobs, 9-15 ms of the web's CPU a request, a tenth of it
(profiled), where orjson writes it in under 1. The two agree on everything such an answer holds
except how a few floats are spelt, so the renderer keeps DRF's output exactly:

- what orjson would spell its own way is handed to DRF's encoder: times (`OPT_PASSTHROUGH_DATETIME`:
  DRF writes them to the millisecond with a `Z`), dataclasses, and whatever orjson does not know
  (a lazy string, a Decimal, an integer past 64 bits, a non-string key: orjson raises, and DRF's
  renderer writes the whole answer);
- a float below 1e-4 (Python writes `1e-05`, orjson `0.00001`) or with a negative exponent
  (`1e-07` against `1e-7`): an answer where such a spelling may be (`0.0000`, or `_negative_exponent`;
  a string's text may look so too) is written by DRF's renderer again. Every other finite float
  is spelt alike (`repr`'s shortest round trip); a non-finite one cannot be stored.

A 1,000-job answer: DRF's renderer 9-12 ms of CPU here, this one 3-5 (orjson's writing under 1,
the checks the rest).

web/tests/test_json_output.py holds it to DRF's renderer.
"""

from typing import Any

import orjson
from rest_framework import renderers
from rest_framework.utils import encoders

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class FastJSONRenderer(renderers.JSONRenderer):
    """JSONRenderer's output, by orjson when it gives the same bytes (see the module)."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None or not (self.compact and not self.ensure_ascii and self.strict):
            return super().render(data, accepted_media_type, renderer_context)
        if self.get_indent(accepted_media_type, renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            text = orjson.dumps(data, default=_drf_default, option=_OPTIONS)
        except (TypeError, orjson.JSONEncodeError):
            return super().render(data, accepted_media_type, renderer_context)
        if b"0.0000" in text or _negative_exponent(text):
            return super().render(data, accepted_media_type, renderer_context)
        if b"\xe2\x80" in text:  # U+2028 and U+2029 (and others of that block): escaped, as DRF does
            text = text.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        return text


_encoder = encoders.JSONEncoder()


def _drf_default(value: Any) -> Any:
    """DRF's encoder's text for what orjson leaves to it, as a string the answer holds as is; what
    DRF would write as another type (a Decimal as a number, a dict, a list) goes back to DRF."""
    converted = _encoder.default(value)
    if type(converted) is not str:
        raise TypeError("not a string: DRF's renderer writes the answer")
    return converted


def _negative_exponent(text: bytes) -> bool:
    """Whether `text` may hold a number with a negative exponent, which orjson spells otherwise
    than Python (1e-7, 1e-07): an `e-` after digits after `:`, `,` or `[` (and an optional minus).
    A walk from each `e-`, not a pattern: those start at every digit or separator, and took
    longer than orjson's writing (the ids' hex has its `e-`, ~270 in a 1,000-job answer). A
    string's text may match too: then DRF writes the answer."""
    at = text.find(b"e-")
    while at != -1:
        start = at - 1
        while start >= 0 and text[start] in _DIGITS:
            start -= 1
        if start < at - 1 and start >= 0:
            if text[start] == _MINUS:
                start -= 1
            if start >= 0 and text[start] in _BEFORE_NUMBER:
                return True
        at = text.find(b"e-", at + 2)
    return False


_DIGITS = frozenset(b"0123456789.")
_BEFORE_NUMBER = frozenset(b":,[")
_MINUS = ord("-")

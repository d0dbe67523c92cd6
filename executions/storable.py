"""What a handler hands back (its result, its error text and traceback), made storable.

A handler's return and its exception text come from anywhere: an `http` receiver's body, a
library's message. Python strings hold characters that the database cannot: PostgreSQL refuses a
NUL (U+0000) in text and in jsonb, and a lone surrogate (U+D800 to U+DFFF, e.g. from
json.loads('"\\ud800"')) cannot be encoded as UTF-8 at all, by PostgreSQL or SQLite. JSON has no
NaN or Infinity, which PostgreSQL's jsonb and SQLite's json_valid refuse. One such value would
fail the statement that records it, and with it every other outcome recorded in that statement.

So they are written out instead of refused: a NUL or lone surrogate becomes its escape, as text
(`\\u0000`, `\\ud800`), and NaN and ±Infinity become the strings "NaN", "Infinity", "-Infinity".
The run keeps the outcome its handler produced: a handler that returned did its work (an `http`
call that was answered 200 happened), and refusing its result would run it again.
"""

import math
import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` with each NUL and lone surrogate written out as its escape (`\\u0000`)."""
    if _UNSTORABLE.search(text) is None:
        return text
    return _UNSTORABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def storable_json(value: Any) -> Any:
    """A JSON value (what json.loads makes, or a handler's return) with every string, keys too,
    made `storable_text`, and every NaN or infinity made a string."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k) if isinstance(k, str) else k: storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value

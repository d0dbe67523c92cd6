"""An error's fingerprint: what stays the same between occurrences of one failure, so that the
dead letter can be read by kind of failure instead of one row per run.

An error as the worker records it is "ExceptionType: message". What varies between two
occurrences of the same failure (ids, numbers, quoted values, times, addresses) is masked;
what does not (the exception type, the words of the message) is kept. The fingerprint is a
short hash of that masked text: a fixed-width key the store writes beside the error (the
transition that records the error writes it in the same statement) and the dead letter groups
by with an index. Pure functions: no database, no settings; executions/tests/test_fingerprints.py
checks them with hypothesis.
"""

import hashlib
import re

# Only the first line speaks for the failure: a message can carry a multi-line body (an HTTP
# answer, a dump) whose detail differs every time. And only so much of it.
_MAX_CHARS = 500

# Applied in order; each replaces what varies with a placeholder that says what was there.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # ISO 8601 times and dates (before the numbers in them are masked one by one).
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    # UUIDs, with or without dashes.
    (re.compile(r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b"), "<id>"),
    # Quoted values: what a message quotes is what it is about (a key, a path, a value).
    (re.compile(r"'(?:[^'\\\n]|\\.)*'"), "<str>"),
    (re.compile(r'"(?:[^"\\\n]|\\.)*"'), "<str>"),
    # Hex: 0x-prefixed, or a run of 8+ hex digits with a digit and a letter (hashes, object
    # ids). Masked as a number: such an id is sometimes all digits, and then the rule for
    # numbers below takes it, so both ways must read the same.
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<n>"),
    # Network addresses (before the numbers in them): IPv4 with an optional port.
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    # Any other number, with its sign, decimals and exponent; a number glued to a word too
    # (worker-7, id42), since such suffixes are counters, not words.
    (re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?"), "<n>"),
)
_SPACES = re.compile(r"\s+")
_LINES = re.compile(r"\r\n|\r|\n")


def masked(error: str) -> str:
    """The error with what varies masked: the first non-blank line, numbers, ids, quoted values,
    hex, addresses and times replaced by placeholders, runs of blanks made one space."""
    # Lines as a traceback or a body breaks them (not str.splitlines, which also breaks at
    # control characters that a quoted value may hold).
    lines = [line for line in _LINES.split(error) if line.strip()]
    text = lines[0][:_MAX_CHARS] if lines else ""
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text).strip()


def fingerprint(error: str) -> str:
    """A 16-hex-digit key for the error's kind: equal for errors that differ only in what
    `masked` masks. "" for no error."""
    text = masked(error)
    if not text:
        return ""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def exception_type(error: str) -> str:
    """The exception's name as the worker records it ("KeyError: 'x'" → "KeyError"), or ""."""
    head, sep, _ = masked(error).partition(":")
    return head if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head) else ""

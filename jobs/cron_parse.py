"""Cron expressions parsed (jobs/cron.py evaluates them; its docstring is the contract): fields,
names, ranges, steps, aliases, and Jenkins' ``H`` resolved from a seed. Pure logic, no Django.
A parsed expression is cached as a template whose hashed items a seed fills in cheaply."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from croniter import CroniterError, croniter


class CronError(ValueError):
    """An expression or timezone that cannot be scheduled; the message says why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # index i spells value low + i


_FIELDS: tuple[_Field, ...] = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    # 7 is accepted as a second spelling of Sunday, as in Vixie cron.
    _Field("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_MINUTE, _HOUR, _DOM, _MONTH, _DOW = range(5)

_ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

# Syntax croniter accepts (or half-accepts: it silently drops "W") that Tickwork
# rejects: its meaning is not expressible here or, for R, not reproducible.
_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("l", "'L' (last)"),
    ("w", "'W' (nearest weekday)"),
    ("r", "'R' (random)"),
    ("?", "'?'"),
)
_ITEM_RE = re.compile(r"^(?P<base>[^/]*)(?:/(?P<step>.*))?$")
# A hashed item, lower-cased: H, H(a-b), H/n, H(a-b)/n.
_HASH_RE = re.compile(r"^h(?:\((?P<first>[^-()]*)-(?P<last>[^-()]*)\))?(?:/(?P<step>.*))?$")
_HASH_TOKEN_RE = re.compile(r"(?<![a-z])h(?![a-z])")
# The bare H's range where it differs from the field's: days 29-31 are missing from some months,
# and Sunday is 0 as well as 7.
_HASH_HIGH = {2: 28, 4: 6}
# Each month's most days (February's in a leap year): what decides whether a day can match.
_MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
_ATOM_RE = re.compile(r"^(?:[0-9]+|[a-z]+)$")
_NUMBER_RE = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class Schedule:
    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    # nth_weekdays[w] holds the occurrences n for "w#n"; empty when unused.
    nth_weekdays: tuple[frozenset[int], ...]
    dom_star: bool
    dow_star: bool
    elapsed: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom_ok = day.day in self.days_of_month
        weekday = day.isoweekday() % 7
        dow_ok = weekday in self.days_of_week or (day.day - 1) // 7 + 1 in self.nth_weekdays[weekday]
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


# --------------------------------------------------------------------------- parsing


def _atom_value(field: _Field, text: str) -> int:
    if not _ATOM_RE.match(text):
        raise CronError(f"{field.name} field: {text!r} is not a valid value")
    if text.isdigit():
        value = int(text)
    elif text in field.names:
        value = field.low + field.names.index(text)
    else:
        raise CronError(f"{field.name} field: {text!r} is not a valid value")
    if not field.low <= value <= field.high:
        raise CronError(f"{field.name} field: {value} is out of range {field.low}-{field.high}")
    return value


def _normalise_item(index: int, item: str) -> tuple[str, tuple[int, int] | None]:
    """Validate one list item; return it in a form croniter expands correctly.

    croniter expands any ``a-a`` range (``5-5``, ``sat-sat``) to the whole field
    and ``7/2`` to every even weekday, so items are handed to it as plain
    numbers, with single-value ranges collapsed and ``a/n`` spelled ``a-max/n``.
    A ``weekday#n`` item is returned separately as ``(weekday, n)``.
    """
    field = _FIELDS[index]
    if not item:
        raise CronError(f"{field.name} field: empty list item")
    if _HASH_TOKEN_RE.search(item):
        raise CronError(
            f"{field.name} field: {item!r} is not valid: 'H' (hashed) stands alone in a list item, "
            "as H, H(a-b), H/n or H(a-b)/n"
        )
    for token, what in _UNSUPPORTED:
        if re.search(rf"(?<![a-z]){re.escape(token)}(?![a-z])", item):
            raise CronError(f"{field.name} field: {what} is not supported")
    match = _ITEM_RE.match(item)
    if match is None:  # pragma: no cover - the pattern matches every string
        raise CronError(f"{field.name} field: {item!r} is not valid")
    base, step_text = match.group("base"), match.group("step")

    step: int | None = None
    if step_text is not None:
        if not _NUMBER_RE.match(step_text):
            raise CronError(f"{field.name} field: step {step_text!r} is not a positive integer")
        step = int(step_text)
        if step == 0:
            raise CronError(f"{field.name} field: step 0 is not a positive integer")

    if "#" in base:
        if index != _DOW:
            raise CronError(f"{field.name} field: '#' is only allowed in the day-of-week field")
        weekday_text, _, nth_text = base.partition("#")
        if step is not None or "-" in weekday_text:
            raise CronError(f"{field.name} field: {item!r}: '#' needs a single weekday")
        weekday = _atom_value(field, weekday_text) % 7
        if not _NUMBER_RE.match(nth_text) or not 1 <= int(nth_text) <= 5:
            raise CronError(f"{field.name} field: {item!r}: the occurrence after '#' must be 1-5")
        return "", (weekday, int(nth_text))

    if base == "*":
        return (item if step is None else f"*/{step}"), None
    if base.count("-") > 1:
        raise CronError(f"{field.name} field: {base!r} is not a valid range")
    if "-" in base:
        first_text, _, last_text = base.partition("-")
        first, last = _atom_value(field, first_text), _atom_value(field, last_text)
        if index == _DOW:
            # Sunday is both 0 and 7: "5-0" ends on Sunday, "7-2" starts on it.
            if last == 0 and first > 0:
                last = 7
            if first == 7 and last < 7:
                first = 0
    else:
        first = _atom_value(field, base)
        last = field.high if step is not None else first

    if first == last:
        return str(first), None
    if first > last:
        if step is not None:
            raise CronError(f"{field.name} field: wrap-around range {base!r} cannot take a step")
        return f"{first}-{last}", None  # croniter wraps these round the end of the field
    return f"{first}-{last}" + ("" if step is None else f"/{step}"), None


def _expand_item(index: int, item: str) -> set[int]:
    field = _FIELDS[index]
    columns = ["*"] * 5
    columns[index] = item
    try:
        expanded = croniter.expand(" ".join(columns))[0][index]
    except CroniterError as exc:
        raise CronError(f"{field.name} field: {item!r} is not valid ({exc})") from exc
    high = 6 if index == _DOW else field.high
    if expanded == ["*"]:
        return set(range(field.low, high + 1))
    return {int(v) % 7 if index == _DOW else int(v) for v in expanded}


@dataclass(frozen=True)
class _Hash:
    """One hashed list item. Without a step it stands for one value of ``low..high``; with one,
    for every ``step`` from ``low + offset`` to ``high``. Its choice (the value's or the offset's
    index) comes from the seed, the field and its position in the field's list."""

    field: int
    position: int
    low: int
    high: int
    step: int | None

    @property
    def choices(self) -> int:
        return self.high - self.low + 1 if self.step is None else self.step

    def values(self, choice: int) -> range:
        first = self.low + choice
        return range(first, first + 1) if self.step is None else range(first, self.high + 1, self.step)

    def text(self, choice: int) -> str:
        values = self.values(choice)
        if len(values) == 1:
            return str(values[0])
        return f"{values[0]}-{self.high}/{self.step}"


def _parse_hash(index: int, position: int, item: str) -> _Hash | None:
    """The hashed item ``item`` (lower-cased) stands for, or None if it is not one."""
    field = _FIELDS[index]
    if not _HASH_TOKEN_RE.match(item) or item.startswith("h#"):
        return None
    match = _HASH_RE.match(item)
    if match is None:
        raise CronError(
            f"{field.name} field: {item.upper()!r} is not a valid hashed value; use H, H(a-b), H/n or H(a-b)/n"
        )
    if match.group("first") is None:
        low, high = field.low, _HASH_HIGH.get(index, field.high)
    else:
        low, high = _atom_value(field, match.group("first")), _atom_value(field, match.group("last"))
        if low > high:
            raise CronError(f"{field.name} field: {item.upper()!r}: the range must run from low to high")
    step: int | None = None
    if match.group("step") is not None:
        step_text = match.group("step")
        if not _NUMBER_RE.match(step_text) or int(step_text) == 0:
            raise CronError(f"{field.name} field: step {step_text!r} is not a positive integer")
        step = int(step_text)
        if step > high - low + 1:
            raise CronError(f"{field.name} field: {item.upper()!r}: step {step} is longer than the range {low}-{high}")
    return _Hash(index, position, low, high, step)


def _parse_field(index: int, text: str) -> tuple[frozenset[int], tuple[frozenset[int], ...], list[_Hash]]:
    values: set[int] = set()
    nth: list[set[int]] = [set() for _ in range(7)]
    hashes: list[_Hash] = []
    for position, item in enumerate(text.split(",")):
        hashed = _parse_hash(index, position, item)
        if hashed is not None:
            hashes.append(hashed)
            continue
        normalised, nth_item = _normalise_item(index, item)
        if nth_item is not None:
            nth[nth_item[0]].add(nth_item[1])
        else:
            values |= _expand_item(index, normalised)
    return _interned(frozenset(values)), tuple(_interned(frozenset(s)) for s in nth), hashes


# One instance of each distinct set: thousands of cached schedules that differ in a minute or
# an hour share their other fields' sets, so the caches below can be large.
_interned: Callable[[frozenset[int]], frozenset[int]] = functools.lru_cache(maxsize=4096)(lambda values: values)


def _split_expression(expression: str) -> list[str]:
    if not isinstance(expression, str):
        raise CronError(f"cron expression must be a string, not {type(expression).__name__}")
    text = expression.strip().lower()
    if not text:
        raise CronError("cron expression is empty")
    if text.startswith("@"):
        if text == "@reboot":
            raise CronError("@reboot is not supported: Tickwork has no notion of a reboot")
        if text not in _ALIASES:
            raise CronError(f"unknown cron alias {expression.strip()!r}; use one of {', '.join(_ALIASES)}")
        text = _ALIASES[text]
    fields = text.split()
    if len(fields) in (6, 7):
        raise CronError(
            f"cron expression has {len(fields)} fields; expected 5 (minute hour day-of-month month "
            "day-of-week) - seconds and year fields are not supported"
        )
    if len(fields) != 5:
        raise CronError(
            f"cron expression has {len(fields)} field{'s' if len(fields) != 1 else ''}; expected 5 "
            "(minute hour day-of-month month day-of-week)"
        )
    return fields


@dataclass(frozen=True)
class _Template:
    """A parsed expression before its hashed items are resolved: what its plain items give per
    field, and its hashed items. ``plain`` is the schedule itself when there are none."""

    expression: str
    values: tuple[frozenset[int], ...]  # per field, from the plain items
    nth_weekdays: tuple[frozenset[int], ...]
    hashes: tuple[_Hash, ...]
    dom_star: bool
    dow_star: bool
    elapsed: bool
    plain: Schedule | None


def _build(template: _Template, choices: tuple[int, ...], expression: str) -> Schedule:
    """The schedule ``template`` is with each hashed item resolved to its choice. The sets of the
    fields without one are the template's own: a resolution costs only its hashed fields."""
    values = list(template.values)
    for hashed, choice in zip(template.hashes, choices, strict=True):
        modulus = 7 if hashed.field == _DOW else 100  # Sunday is 0 as well as 7
        values[hashed.field] = values[hashed.field] | {v % modulus for v in hashed.values(choice)}
    return Schedule(
        expression=expression,
        minutes=tuple(sorted(values[_MINUTE])),
        hours=tuple(sorted(values[_HOUR])),
        days_of_month=values[_DOM],
        months=values[_MONTH],
        days_of_week=values[_DOW],
        nth_weekdays=template.nth_weekdays,
        dom_star=template.dom_star,
        dow_star=template.dow_star,
        elapsed=template.elapsed,
    )


def _hardest_choices(template: _Template) -> tuple[int, ...]:
    """The resolution least likely to match a day: each hashed day-of-month at its latest
    first day, each hashed month at its shortest. A day of month d exists in month m iff
    d <= m's most days, so when this one fires, so does every other (when day-of-month and
    day-of-week are both restricted, any weekday matches a day of every month anyway)."""
    choices = []
    for hashed in template.hashes:
        if hashed.field == _DOM:
            choices.append(hashed.choices - 1)
        elif hashed.field == _MONTH:
            lengths = [max(_MONTH_DAYS[m] for m in hashed.values(c)) for c in range(hashed.choices)]
            choices.append(lengths.index(min(lengths)))
        else:
            choices.append(0)
    return tuple(choices)


# Large enough for every resolution of "H H * * *" (1,440) spelled out, as a caller of resolve()
# would, with room to spare.
@functools.lru_cache(maxsize=8192)
def template_of(expression: str) -> _Template:
    fields = _split_expression(expression)
    for index in (_DOM, _DOW):
        if fields[index] == "?":  # Quartz spelling of "no specific value"
            fields[index] = "*"
    parsed = [_parse_field(index, text) for index, text in enumerate(fields)]
    template = _Template(
        expression=expression,
        values=tuple(values for values, _, _ in parsed),
        nth_weekdays=parsed[_DOW][1],
        hashes=tuple(hashed for _, _, hashes in parsed for hashed in hashes),
        dom_star=fields[_DOM].startswith("*"),
        dow_star=fields[_DOW].startswith("*"),
        elapsed=fields[_MINUTE].startswith("*") or fields[_HOUR].startswith("*"),
        plain=None,
    )
    if not template.hashes:
        schedule = _build(template, (), expression)
        if not _some_day_matches(schedule):
            raise CronError(
                f"cron expression {expression!r} never fires: no calendar date matches its "
                "day-of-month, month and day-of-week fields"
            )
        return dataclasses.replace(template, plain=schedule)
    choices = _hardest_choices(template)
    if not _some_day_matches(_build(template, choices, expression)):
        raise CronError(
            f"cron expression {expression!r} never fires for some jobs (resolved as "
            f"{_resolved_text(template, choices)!r}): no calendar date matches its day-of-month, month "
            "and day-of-week fields; keep a hashed day of month within 1-28"
        )
    return template


def _resolved_text(template: _Template, choices: tuple[int, ...]) -> str:
    """The template's expression as written, with each hashed item spelled as its resolution."""
    texts = {(h.field, h.position): h.text(choice) for h, choice in zip(template.hashes, choices, strict=True)}
    fields = template.expression.split()
    return " ".join(
        ",".join(texts.get((index, position), item) for position, item in enumerate(field.split(",")))
        for index, field in enumerate(fields)
    )


def _choice(seed: str, hashed: _Hash) -> int:
    # SHA-256, not hash(): str hashes are salted per process, and a job's times must not move
    # when a dispatcher restarts. 64 bits modulo at most 60 choices is uniform to 1e-17.
    digest = hashlib.sha256(f"{seed}\x1f{hashed.field}\x1f{hashed.position}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % hashed.choices


@functools.lru_cache(maxsize=8192)
def _resolved(expression: str, choices: tuple[int, ...]) -> Schedule:
    template = template_of(expression)
    text = _resolved_text(template, choices)
    schedule = _build(template, choices, text)
    # template_of refused what _hardest_choices shows can miss; this is the last word for the odd
    # corner it does not cover (a day-of-month beginning with * and a restricted day-of-week).
    if any(h.field in (_DOM, _MONTH, _DOW) for h in template.hashes) and not _some_day_matches(schedule):
        raise CronError(
            f"cron expression {expression!r} never fires when resolved as {text!r}: no calendar date "
            "matches its day-of-month, month and day-of-week fields"
        )
    return schedule


def schedule_for(expression: str, seed: str | None) -> Schedule:
    template = template_of(expression)
    if template.plain is not None:
        return template.plain
    if seed is None:
        raise CronError(
            f"cron expression {expression!r} has hashed (H) values, which need a seed to resolve "
            "(a job's schedule is resolved with its id)"
        )
    if not isinstance(seed, str) or not seed:
        raise CronError(f"the seed must be a non-empty string, not {seed!r}")
    return _resolved(expression, tuple(_choice(seed, hashed) for hashed in template.hashes))


def _some_day_matches(schedule: Schedule) -> bool:
    # Between 1901 and 2099 the calendar repeats every 28 years and every year
    # type occurs in any 28-year span, so scanning one span decides it.
    day, end = date(2000, 1, 1), date(2028, 1, 1)
    while day < end:
        if day.month not in schedule.months:
            day = first_of_next_month(day)
        elif schedule.matches_day(day):
            return True
        else:
            day += timedelta(days=1)
    return False


def first_of_next_month(day: date) -> date:
    if day.month == 12:
        if day.year == date.max.year:
            raise CronError("no fire before the end of the calendar (year 9999)")
        return date(day.year + 1, 1, 1)
    return date(day.year, day.month + 1, 1)

"""An id typed into one of the dashboard's search boxes or given to the command line (web/cli/), in
any form the pages show one: a whole UUID with or without its dashes (a job's, execution's or
run's page), or its first characters, at least the 8 of the short ids the lists (and the command
line's tables) show, with or without the dashes where they fall. Any case.

A prefix of a UUID is a range of UUIDs (every id from the prefix padded with 0s to the prefix
padded with fs), which a UUID column's btree reads as one range scan, as it reads an equality: so
a short id costs what a whole one does, on PostgreSQL (uuid) and SQLite (32 hex characters,
compared as text: the same order). Text that is not an id form is no span, and the box searches
what else it searches (names, errors)."""

import uuid
from dataclasses import dataclass

from django.db.models import Q

# The lists' short ids (templatetags.dashboard.short_id): anything shorter reads as text, as a
# year or a word of hex letters ("2026", "cafe") would match ids by chance.
MIN_PREFIX = 8
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class IdSpan:
    """The ids a typed id can mean: one id (a whole one typed), or every id with a prefix."""

    low: uuid.UUID
    high: uuid.UUID

    @property
    def whole(self) -> uuid.UUID | None:
        return self.low if self.low == self.high else None

    def q(self, field: str) -> Q:
        """The rows whose UUID `field` is in the span."""
        if self.whole is not None:
            return Q(**{field: self.whole})
        # Bounds, not __range: a foreign key (an execution's run_id) takes no range lookup.
        return Q(**{f"{field}__gte": self.low, f"{field}__lte": self.high})

    def text_q(self, field: str) -> Q:
        """The rows whose text `field` holds an id of the span as the pages write one (dashed, in
        lower case), such as an audit row's target. The range lets the column's index find them
        whatever the database's collation (every such id sorts between the span's ends); the
        prefix keeps out any other text that sorts there."""
        if self.whole is not None:
            return Q(**{field: str(self.whole)})
        low, high = str(self.low), str(self.high)
        prefix = low[: next(i for i, (a, b) in enumerate(zip(low, high, strict=True)) if a != b)]
        return Q(**{f"{field}__range": (low, high), f"{field}__startswith": prefix})


def id_span(text: str) -> IdSpan | None:
    """The ids `text` can mean, or None when it is not an id form."""
    value = text.strip().lower()
    try:
        whole = uuid.UUID(value)
    except ValueError:
        pass
    else:
        return IdSpan(whole, whole)
    digits = value.replace("-", "")
    if not MIN_PREFIX <= len(digits) < 32 or not _HEX.issuperset(digits):
        return None
    low = uuid.UUID(digits.ljust(32, "0"))
    # Dashes only where an id has them (after 8, 12, 16 and 20 digits): "3f2a9c1b-4d" is a
    # prefix; "3f2a-9c1b" is text.
    if "-" in value and not str(low).startswith(value):
        return None
    return IdSpan(low, uuid.UUID(digits.ljust(32, "f")))

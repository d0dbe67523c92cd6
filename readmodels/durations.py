"""How a span of time is written for people: on the dashboard, in an execution's reason to wait,
in an alert's summary. "+55533 s" asks the reader to divide; "15 h 25 min" does not.

The two largest units that are not zero, the smaller one cut rather than rounded, so a time
never reads later than it is ("59 min 59 s", not "1 h"); a whole unit alone ("2 h", not
"2 h 0 min"). Below a minute, whole seconds; below a second, see `milliseconds`.
"""

UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


def duration(seconds: float) -> str:
    """45 s, 2 min 5 s, 15 h 25 min, 3 d 4 h, 7 d; 0 s for anything under a second or negative."""
    left = max(int(seconds), 0)
    parts: list[tuple[int, str]] = []
    for name, size in UNITS:
        count, left = divmod(left, size)
        if count or parts:
            parts.append((count, name))
        if len(parts) == 2:
            break
    shown = [f"{count} {name}" for count, name in parts if count]
    return " ".join(shown) or "0 s"


def from_now(seconds: float) -> str:
    """How long until a moment ahead: "in 45 s", "in 2 min 5 s"; "in under a second" where
    `duration` would say 0 s of a wait that has not ended (a rate limit's next turn, mostly)."""
    return "in under a second" if 0 < seconds < 1 else f"in {duration(seconds)}"


def milliseconds(value: float) -> str:
    """A duration measured in milliseconds (a run's, a start lag, a retry's delay): 840 ms, 12.5 s
    (a tenth of a second still tells runs apart under a minute), then as `duration`."""
    if value < 1_000:
        return f"{max(int(value), 0)} ms"
    if value < 60_000:
        return f"{int(value / 100) / 10:.1f} s"
    return duration(value / 1000)


def period(seconds: int) -> str:
    """An exact span, with every unit that is not zero: an interval job's period, which a cut
    would misstate ("every 1 h 2 min 5 s", where `duration` says 1 h 2 min)."""
    left, shown = max(int(seconds), 0), []
    for name, size in UNITS:
        count, left = divmod(left, size)
        if count:
            shown.append(f"{count} {name}")
    return " ".join(shown) or "0 s"

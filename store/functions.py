"""What SQLite lacks of PostgreSQL's functions, in Python: for the embedded store's reads, and for
whoever computes the same figure from rows already read (the pools' minute samples, an alert's
start lag), so that both stores' figures agree."""

from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between closest ranks, as PostgreSQL's percentile_cont computes it:
    for reads that SQLite cannot spell (the dashboard's start-lag chart, the START_LAG_P99 alert)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)

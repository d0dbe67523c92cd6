"""The figures a benchmark run reports: value, baseline, ratio, target; medians and the table."""

import statistics
from dataclasses import dataclass, field

# --- Results ----------------------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    unit: str
    value: float
    baseline: float
    baseline_name: str
    target: str
    passed: bool
    samples: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("nan")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = int(-(-len(ordered) * q // 100))  # ceil(n·q/100)
    return ordered[max(1, min(len(ordered), rank)) - 1]


def print_table(figures: list[Figure]) -> None:
    rows = [("figure", "value", "baseline", "ratio", "target", "")]
    for f in figures:
        rows.append(
            (
                f.name,
                _fmt(f.value, f.unit),
                f"{_fmt(f.baseline, f.unit)} {f.baseline_name}",
                f"{f.ratio:.2f}x",
                f.target,
                "" if f.target == "reference" else "PASS" if f.passed else "FAIL",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f}/s" if value >= 100 else f"{value:.2f}/s"  # a rate limit's few a second
    if unit == "ms":
        return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"
    return f"{value:g}{unit}"

"""How the command line prints: a table a person reads, or with --json the API's own JSON for the
same objects (the serializers of web/api), so what a script reads from one it reads from the
other. The tables are made from that same JSON, never from the models, so the two cannot say
different things."""

import json
from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.utils.encoders import JSONEncoder

# A cell past this is cut (with "…"): a long name or error must not push the other columns off
# the screen. --json, and `jobs show`, give the whole text.
MAX_CELL = 48
NONE = "-"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns as wide as their widest cell, two spaces apart; the last one not padded."""
    cells = [headers, *[[cut(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def fields(pairs: list[tuple[str, str]]) -> str:
    """One object's fields, a line each: `name:  value`, the values aligned."""
    width = max(len(name) for name, _ in pairs) + 1
    return "\n".join(f"{name + ':':<{width}}  {value}" for name, value in pairs)


def cut(text: str, limit: int = MAX_CELL) -> str:
    line = text.splitlines()[0] if text else ""
    if len(line) > limit or line != text:
        return line[: limit - 1] + "…"
    return line


def when(value: str | None, *, fraction: bool = False) -> str:
    """An API time (ISO 8601, UTC, ending in Z) as a table shows it: 2027-03-14 09:00:01Z."""
    if not value:
        return NONE
    at = parse_datetime(value)
    if at is None:
        return value
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S") + (f".{at.microsecond // 1000:03d}" if fraction else "") + "Z"


def short(value: str | None) -> str:
    """An id as the dashboard's lists show it (and as the commands take it): its first 8 characters."""
    return value[:8] if value else NONE


def text(value: Any) -> str:
    return NONE if value is None or value == "" else str(value)


def as_json(data: Any) -> str:
    """The API's body, as its renderer would write it, indented for a person who reads it too."""
    return json.dumps(data, cls=JSONEncoder, indent=2, ensure_ascii=False)


def as_json_line(data: Any) -> str:
    """One object on one line (JSON Lines): what --follow prints, an object as each comes."""
    return json.dumps(data, cls=JSONEncoder, ensure_ascii=False)


def executions_table(executions: list[dict[str, Any]], *, with_job: bool) -> str:
    """Executions as the API represents them (ExecutionSerializer), a row each."""
    headers = ["ID", *(["JOB"] if with_job else []), "ATTEMPT", "STATE", "ORIGIN", "SCHEDULED FOR"]
    headers += ["STARTED", "FINISHED", "WORKER", "NOTE"]
    rows = [
        [
            short(e["executionId"]),
            *([short(e["jobId"])] if with_job else []),
            str(e["attempt"]),
            e["state"],
            e["origin"],
            when(e["scheduledFor"]),
            when(e["startedAt"]),
            when(e["finishedAt"]),
            text(e["workerId"]),
            _note(e),
        ]
        for e in executions
    ]
    return table(headers, rows)


def _note(execution: dict[str, Any]) -> str:
    """Why it waits (PENDING, QUEUED), or how it failed."""
    if execution.get("pendingReason"):
        return (
            f"{execution['pendingReason']}: {execution['pendingDetail']}"
            if execution.get("pendingDetail")
            else execution["pendingReason"]
        )
    return text(execution.get("error"))

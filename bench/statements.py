"""The statements stage: each statement of the dispatcher's loop exactly as the store sends it
(captured from the code, parameters and all), timed on the full database and on the small one
(a tenth of the backlog, the same due set row for row) in turn, each run in a transaction that is
rolled back; medians.

The claim is captured twice: as it is, and with named rate limits defined (pools/rate_limits.py)
and a fifth of the due set naming one of them. Then it also reads the limits and what says the
chosen executions' limits, gives turns to those over a limit, walks the pool again past them, and
saves the limits' clocks (scheduling/rate_limiting.py); it must stay as flat in the backlog."""

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bench.config import log
from bench.results import Figure, median

# The limits of the second claim: (name, per second, burst), each named by one in NAMED_ONE_IN of
# the due set. The first gives a turn to all but one of its executions a claim chooses, the
# second admits its burst first; so the claim walks the pool again, as a backlog over a limit makes it.
LIMITS = (("bench-statements-a", 20.0, 1), ("bench-statements-b", 100.0, 10))
NAMED_ONE_IN = 10
WITH_LIMITS = "claim, rate limits defined"
MOVE = "WITH moved AS (UPDATE executions_execution"  # the claim's last statement: the rows moved


def capture(call: Callable[[], object]) -> list[tuple[str, list]]:
    """The statements (not savepoints) that `call` sends, with their parameters. Whatever `call`
    changed is rolled back."""
    from django.db import connection, transaction

    seen: list[tuple[str, list]] = []

    def record(execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")):
            seen.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record), transaction.atomic():
        call()
        transaction.set_rollback(True)
    return seen


class Statements:
    def __init__(self, bench) -> None:
        self.bench, self.cfg = bench, bench.cfg

    def run(self) -> None:
        from django.conf import settings

        from scheduling import admission
        from store import store

        bench = self.bench
        grace = timedelta(seconds=settings.TICKWORK_PUBLISH_GRACE_SECONDS)
        earliest = min(
            db.scalar("SELECT min(available_at) FROM executions_execution WHERE state = 'PENDING'")
            for db in (bench.db, bench.small)
        )

        # The claim last: each rolled-back run leaves a batch of dead row versions behind it.
        # A claim is a few statements (scheduling/admission.py): the claim lock, the live workers'
        # slots, what is admitted, the tenants' limits, the pool's due work (and, as here where
        # more is due than one claim takes, the tenants' fair order), then the UPDATE of the rows
        # taken. The captured ids are the same rows on both databases: their due sets are copies.
        def claim(now: datetime) -> object:
            return admission.claim(
                now=now, limit=bench.batch, publish_grace=grace, limit_of=lambda pool, load: load.slots
            )

        for db in (bench.db, bench.small):
            db.capacity(10 * bench.batch)  # slots enough: the claim is limited by its batch
        statements = {
            "empty poll": capture(lambda: claim(earliest - timedelta(seconds=1))),
            "next-due peek": capture(lambda: store().next_due_at(after=datetime.now(UTC))),
            "claim": capture(lambda: claim(datetime.now(UTC))),
        }
        try:
            self.name_limits(True)
            statements[WITH_LIMITS] = capture(lambda: claim(datetime.now(UTC)))
            bench.info["statements"] = {name: [sql for sql, _ in steps] for name, steps in statements.items()}
            self.time(statements)
        finally:
            self.name_limits(False)
            bench.db.capacity(0)

    def name_limits(self, named: bool) -> None:
        """Define LIMITS on both databases and make part of the due set name them, or undo that
        (the dispatch stage after this one claims the same due set unlimited)."""
        from pools import rate_limits

        for db in (self.bench.db, self.bench.small):
            if named:
                for name, per_second, burst in LIMITS:
                    db.define_rate_limit(name, per_second, burst)
                db.conn.execute(
                    "UPDATE jobs_job SET rate_limit = (%s::text[])[abs(hashtext(id::text)) %% %s + 1]"
                    " WHERE tenant_id = (SELECT id FROM tenants_tenant WHERE slug = 'bench-due-0')",
                    [[name for name, _, _ in LIMITS], NAMED_ONE_IN],
                )  # out of the array's bounds is NULL: the rest name none
            else:
                db.conn.execute("UPDATE jobs_job SET rate_limit = NULL WHERE rate_limit IS NOT NULL")
                db.conn.execute("DELETE FROM pools_ratelimit")
            db.vacuum()
        rate_limits.definitions.forget()  # this process read them before (none): read them again

    def time(self, statements: dict[str, list[tuple[str, list]]]) -> None:
        """As Store.fetch runs them: prepared, with server-side parameters, when the settings allow
        it (DATABASE_PREPARED_STATEMENTS); else bound on the client, as Django does. Runs alternate
        between the databases. Each statement of a claim is timed too (`info.claim_steps_ms`):
        where a claim's cost goes, and which of its statements grows with the backlog."""
        import psycopg
        from django.conf import settings

        bench, pending, small = self.bench, self.cfg.pending, self.bench.info["pending_small"]
        prepared = settings.DATABASES["default"].get("OPTIONS", {}).get("prepare_threshold") is not None
        bench.info["statements_prepared"] = prepared
        conns = {
            which: psycopg.connect(
                db.url, autocommit=True, cursor_factory=psycopg.Cursor if prepared else psycopg.ClientCursor
            )
            for which, db in (("full", bench.db), ("small", bench.small))
        }
        plain_claim = {}
        try:
            for name, steps in statements.items():
                claim = name.startswith("claim")
                runs = max(10, self.cfg.statement_runs // 10) if claim else self.cfg.statement_runs
                samples: dict[str, list[float]] = {"full": [], "small": []}
                step_ms: dict[str, list[list[float]]] = {"full": [[] for _ in steps], "small": [[] for _ in steps]}
                rows = {}
                for i in range(runs):
                    for which in ("full", "small") if i % 2 else ("small", "full"):
                        conn = conns[which]
                        with conn.transaction(force_rollback=True), conn.cursor() as cursor:
                            started = time.perf_counter()
                            for n, (sql, params) in enumerate(steps):
                                began = time.perf_counter()
                                cursor.execute(sql, params, prepare=prepared)
                                result = cursor.fetchall() if cursor.description else []
                                step_ms[which][n].append((time.perf_counter() - began) * 1000)
                                if sql.startswith(MOVE):
                                    rows[which] = len(result)
                            samples[which].append((time.perf_counter() - started) * 1000)
                value, base = median(samples["full"]), median(samples["small"])
                log(f"  {name}: {value:.3f} ms at {pending:,}, {base:.3f} ms at {small:,}; rows moved {rows}")
                if claim:
                    self.steps(name, steps, step_ms)
                ok = value <= 1.3 * base
                target = "≤ 1.3x baseline"
                if name == "empty poll":
                    ok = ok and value <= 1.0
                    target += ", ≤ 1 ms"
                label = name.replace("claim", f"claim ({bench.batch})", 1) if claim else name
                bench.figures.append(
                    Figure(f"{label} @ {pending:,}", "ms", value, base, f"@ {small:,}", target, ok, samples)
                )
                if name == "claim":
                    plain_claim = {"value": value, "label": label}
                elif name == WITH_LIMITS and plain_claim:
                    # For reference: what the limits add to a claim at the full backlog.
                    bench.figures.append(
                        Figure(
                            f"{label} @ {pending:,}", "ms", value, plain_claim["value"],
                            f"{plain_claim['label']} @ {pending:,}", "reference", True,
                        )
                    )  # fmt: skip
        finally:
            for conn in conns.values():
                conn.close()

    def steps(self, name: str, steps: list[tuple[str, list]], step_ms: dict[str, list[list[float]]]) -> None:
        """Log and keep a claim's statements' medians on both databases, the costliest first."""
        medians = [
            {
                "sql": " ".join(sql.split())[:90],
                "full_ms": round(median(step_ms["full"][n]), 3),
                "small_ms": round(median(step_ms["small"][n]), 3),
            }
            for n, (sql, _) in enumerate(steps)
        ]
        self.bench.info.setdefault("claim_steps_ms", {})[name] = medians
        for step in sorted(medians, key=lambda s: -s["full_ms"])[:6]:
            log(f"    {step['full_ms']:8.3f} ms / {step['small_ms']:8.3f} ms  {step['sql']}")

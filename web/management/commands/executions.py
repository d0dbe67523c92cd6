import sys
import time
from typing import Any

from django.core.management.base import BaseCommand

from executions.models import ExecutionLog, in_states
from executions.states import ExecutionState
from readmodels.logs import log_dropped, log_lines
from readmodels.selectors import execution_list
from web.api.execution_logs import ExecutionLogLineSerializer
from web.api.execution_serializers import ExecutionSerializer
from web.cli import arguments, tables
from web.cli.follow import follow
from web.cli.lookup import execution_in, job_in, tenant_named

# The exit status after Ctrl-C stops --follow, as a shell reports a process that SIGINT ended.
INTERRUPTED = 130


class Command(BaseCommand):
    help = "A tenant's executions: list them (a job's, or all), or print one's log lines. README, 'Command line'."

    # Injected: a test follows an execution without waiting for it in real time.
    sleep = staticmethod(time.sleep)

    def add_arguments(self, parser) -> None:
        subparsers = arguments.subcommands(parser, title="subcommands (each takes --help)")
        listing = arguments.subcommand(subparsers, "list", summary="List executions, newest scheduled first.")
        listing.add_argument(
            "--job", metavar="ID", help="only this job's executions (its id whole, or its first 8 characters or more)"
        )
        listing.add_argument(
            "--state",
            action="append",
            type=arguments.states(ExecutionState.values),
            help="only executions in this state (DEAD: the dead letter); give it again for several",
        )
        arguments.add_limit(listing, "executions", default=20)
        logs = arguments.subcommand(subparsers, "logs", summary="Print what an execution's handler logged.")
        arguments.add_id(logs, "execution")
        logs.add_argument("--attempt", type=arguments.positive, metavar="N", help="only the lines of attempt N")
        logs.add_argument(
            "--follow",
            action="store_true",
            help="keep printing new lines as they are logged, until the execution ends (or Ctrl-C); "
            "with --json, one JSON object a line",
        )

    def handle(self, *args, subcommand: str, tenant: str, json: bool, **options) -> None:
        found = tenant_named(tenant)
        if subcommand == "list":
            executions = execution_list(scope=[found.pk]).order_by("-scheduled_for", "-pk")
            if options["job"] is not None:
                executions = executions.filter(job=job_in(found, options["job"]))
            if options["state"]:
                executions = executions.filter(in_states(options["state"]))
            limit = options["limit"]
            page = list(executions[: limit + 1])
            if len(page) > limit:
                page = page[:limit]
                self.stderr.write(f"more executions than --limit {limit}: the newest {limit} are shown")
            results = ExecutionSerializer(page, many=True).data
            self._print({"results": results}, json, lambda data: _executions(data["results"], options["job"]))
            return
        execution = execution_in(found, options["id"])
        if not options["follow"]:
            lines = log_lines(execution=execution, attempt=options["attempt"])
            dropped = log_dropped(execution=execution)
            data = {
                "results": ExecutionLogLineSerializer(lines, many=True).data,
                "next": None,  # every line is here: the command does not page
                "dropped": [
                    {"attempt": n, "lines": count}
                    for n, count in sorted(dropped.items())
                    if options["attempt"] is None or n == options["attempt"]
                ],
            }
            self._print(data, json, lambda page: "\n".join(_line(line) for line in page["results"]))
            return

        def emit(lines: list[ExecutionLog]) -> None:
            for line in ExecutionLogLineSerializer(lines, many=True).data:
                self.stdout.write(tables.as_json_line(line) if json else _line(line))
            self.stdout.flush()

        try:
            follow(execution=execution, attempt=options["attempt"], emit=emit, sleep=self.sleep)
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED)

    def _print(self, data: Any, json: bool, table) -> None:
        text = tables.as_json(data) if json else table(data)
        if text:
            self.stdout.write(text)


def _executions(executions: list[dict[str, Any]], job: str | None) -> str:
    return tables.executions_table(executions, with_job=job is None) if executions else "no executions"


def _line(line: dict[str, Any]) -> str:
    """A log line as `tail` would show it: when, which attempt, level, logger, message."""
    at = tables.when(line["time"], fraction=True)
    return f"{at}  #{line['attempt']}  {line['level']:<8} {line['logger']}  {line['message']}"

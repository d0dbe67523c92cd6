from typing import Any

from django.core.management.base import BaseCommand, CommandError

from executions.clock import db_now
from executions.standing import jobs_in
from jobs.models import Job
from jobs.selectors import job_list
from jobs.states import InvalidJobTransition, JobState
from readmodels.durations import duration, period
from readmodels.last_runs import attach_last_runs
from readmodels.selectors import job_resume_preview
from web.api.execution_serializers import ExecutionSerializer
from web.api.job_serializers import JobDetailOutputSerializer, JobOutputSerializer
from web.api.resume_serializers import ResumePreviewSerializer
from web.cli import arguments, tables
from web.cli.job_actions import ACTIONS, job_act
from web.cli.lookup import job_in, tenant_named

# What each action prints after the job's short id and name, from the API's JSON of the job.
_DONE = {
    "pause": lambda job: "paused: no run of it starts until it is resumed",
    "resume": lambda job: f"resumed: its next fire {tables.when(job['nextFireAt'])}",
    "cancel": lambda job: "cancelled: no future fires; its runs not yet started are cancelled",
}
# The fires a dry run lists by their times; the counts say how many there are in all.
_LISTED_FIRES = 5


class Command(BaseCommand):
    help = (
        "A tenant's jobs: list them, show one, or trigger, pause, resume or cancel one (audited as actor kind "
        "'cli', the operating system's user). README, 'Command line'."
    )

    def add_arguments(self, parser) -> None:
        subparsers = arguments.subcommands(parser, title="subcommands (each takes --help)")
        listing = arguments.subcommand(subparsers, "list", summary="List the tenant's jobs, newest first.")
        listing.add_argument(
            "--state",
            action="append",
            type=arguments.states(JobState.values),
            help=f"only jobs in this state ({', '.join(JobState.values)}); give it again for several",
        )
        arguments.add_limit(listing, "jobs", default=50)
        show = arguments.subcommand(subparsers, "show", summary="Show a job and its latest executions.")
        arguments.add_id(show, "job")
        for action, summary in (
            ("trigger", "Run a job now, outside its schedule (a new execution, due at once)."),
            ("pause", "Pause a job: no run of it starts until it is resumed."),
            ("resume", "Resume a paused job; its missed fires run as its misfirePolicy says."),
            ("cancel", "Cancel a job: no future fires; its runs not yet started are cancelled."),
        ):
            acting = arguments.subcommand(subparsers, action, summary=summary)
            arguments.add_id(acting, "job")
            if action == "resume":
                acting.add_argument(
                    "--dry-run",
                    action="store_true",
                    help="change nothing: say which missed fires resuming now would run and skip",
                )

    def handle(self, *args, subcommand: str, tenant: str, json: bool, **options) -> None:
        found = tenant_named(tenant)
        if subcommand == "list":
            self._list(found.pk, states=options["state"], limit=options["limit"], json=json)
        elif subcommand == "show":
            job = job_in(found, options["id"])
            self._print(JobDetailOutputSerializer(job).data, json, _show)
        elif subcommand == "resume" and options["dry_run"]:
            self._dry_run(job_in(found, options["id"]), json=json)
        else:
            assert subcommand in ACTIONS
            job, execution = job_act(tenant=found, given=options["id"], action=subcommand, now=db_now())
            if execution is not None:
                data = ExecutionSerializer(execution).data
                self._print(data, json, lambda e: f"triggered {_named(job)}: execution {_executed(e)}")
            else:
                self._print(JobOutputSerializer(job).data, json, lambda j: f"{_named(job)} {_DONE[subcommand](j)}")

    def _list(self, tenant_id: int, *, states: list[str] | None, limit: int, json: bool) -> None:
        jobs = job_list(scope=[tenant_id]).order_by("-created_at", "-pk")
        if states:
            jobs = jobs.filter(jobs_in(states))
        page = list(jobs[: limit + 1])
        if len(page) > limit:
            page = page[:limit]
            self.stderr.write(f"more jobs than --limit {limit}: the newest {limit} are shown")
        results = JobOutputSerializer(attach_last_runs(page), many=True).data
        self._print({"results": results}, json, lambda data: _jobs_table(data["results"]) if page else "no jobs")

    def _dry_run(self, job: Job, *, json: bool) -> None:
        try:
            preview = job_resume_preview(job=job, now=db_now())
        except InvalidJobTransition as exc:
            raise CommandError(f"resume refused: {exc}") from exc
        self._print(ResumePreviewSerializer(preview).data, json, lambda p: _dry_run(job, p))

    def _print(self, data: Any, json: bool, table) -> None:
        self.stdout.write(tables.as_json(data) if json else table(data))


def _named(job: Job) -> str:
    return f"job {tables.short(str(job.pk))} ({job.name})"


def _executed(execution: dict[str, Any]) -> str:
    return (
        f"{tables.short(execution['executionId'])}, {execution['state']}, due {tables.when(execution['availableAt'])}"
    )


def _jobs_table(jobs: list[dict[str, Any]]) -> str:
    headers = ["ID", "NAME", "TYPE", "STATE", "FIRES", "RUNS", "NEXT FIRE", "LAST RUN"]
    rows = [
        [
            tables.short(job["jobId"]),
            job["name"],
            job["type"],
            job["state"],
            _fires(job),
            _runs(job),
            tables.when(job["nextFireAt"]),
            f"{job['lastRunState']} {tables.when(job['lastRunAt'])}" if job["lastRunState"] else tables.NONE,
        ]
        for job in jobs
    ]
    return tables.table(headers, rows)


def _fires(job: dict[str, Any]) -> str:
    """What makes the job fire, as the dashboard's lists say it (shorter)."""
    kind = job["type"]
    if kind == "CRON":
        return f"{job['schedule']} {job['timezone']}"
    if kind == "INTERVAL":
        return f"every {period(job['everySec'])}"
    if kind == "ONCE":
        return f"at {tables.when(job['runAt'])}"
    if kind == "DELAYED":
        return f"delayed {duration(job['delaySec'])}"
    return f"on {job['on']}"


def _runs(job: dict[str, Any]) -> str:
    """What it runs: a handler in its pool, or a workflow's steps."""
    if job["target"] is None:
        steps = (job["workflow"] or {}).get("steps", [])
        return f"workflow of {len(steps)} steps"
    return f"{job['target']['pool']}/{job['target']['handler']}"


def _show(job: dict[str, Any]) -> str:
    policy = job["retryPolicy"]
    pairs = [
        ("job", job["jobId"]),
        ("name", job["name"]),
        ("tenant", job["tenant"]),
        ("type", job["type"]),
        ("state", job["state"]),
        ("fires", _fires(job)),
        ("runs", _runs(job)),
        ("next fire", tables.when(job["nextFireAt"])),
        ("last run", f"{job['lastRunState']} {tables.when(job['lastRunAt'])}" if job["lastRunState"] else "none yet"),
        ("priority", job["priority"]),
        (
            "retries",
            f"{policy['maxAttempts']} attempts, {policy['backoff'].lower()} backoff from {policy['initialDelayMs']} ms"
            f" to {policy['maxDelayMs']} ms{', with jitter' if policy['jitter'] else ''}",
        ),
        ("timeout", duration(job["timeoutSec"])),
        ("misfire policy", job["misfirePolicy"]),
        ("concurrency", job["concurrencyPolicy"]),
        ("payload", tables.as_json_line(job["payload"])),
        ("created", tables.when(job["createdAt"])),
        ("updated", tables.when(job["updatedAt"])),
    ]
    latest = job["latestExecutions"]
    executions = tables.executions_table(latest, with_job=False) if latest else "none"
    return f"{tables.fields(pairs)}\n\nlatest executions:\n{executions}"


def _dry_run(job: Job, preview: dict[str, Any]) -> str:
    def fires(times: list[str], count: int) -> str:
        shown = ", ".join(tables.when(at) for at in times[:_LISTED_FIRES])
        more = "…" if count > min(len(times), _LISTED_FIRES) else ""
        at_least = "at least " if preview["countsCapped"] else ""
        return f"{at_least}{count}" + (f": {shown}{', ' + more if more else ''}" if shown else "")

    pairs = [
        ("dry run", f"nothing changed; {_named(job)} is {preview['state']}"),
        ("at", tables.when(preview["at"])),
        ("misfire policy", f"{preview['misfirePolicy']} (grace {duration(preview['misfireGraceSec'])})"),
        ("would run", fires(preview["wouldRun"], preview["wouldRunCount"])),
        ("would skip", fires(preview["wouldSkip"], preview["wouldSkipCount"])),
        ("then next fire", tables.when(preview["nextFireAt"])),
    ]
    return tables.fields(pairs)

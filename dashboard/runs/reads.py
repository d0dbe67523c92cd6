"""Reads for the dashboard's view of workflow runs: a run with its steps and graph, and a job's runs.

Scoped like dashboard/selectors.py: every function takes `scope` (tenant ids, or None for staff)
and starts from a scoped queryset, so another tenant's run is simply not found.

Costs, whatever the number of steps (a workflow has at most jobs.workflow.MAX_STEPS): a run page
reads the run and its job in one query and its steps' executions in one more (the execution_run
index); a page of a job's runs is one walk of run_job_history and one grouped count of their
steps' states (the same index), never a query per run.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, OuterRef, QuerySet, Subquery

from dashboard.runs.graph import Graph, Node, layout
from executions.models import Execution, ExecutionEvent, Run
from executions.states import ExecutionState
from jobs import workflow
from jobs.models import Job
from readmodels.runs import UNFINISHED_RUN_STATES, run_state
from readmodels.selectors import execution_list

S = ExecutionState
PAGE_SIZE = 50


def run_list(*, scope: list[int] | None) -> QuerySet[Run]:
    runs = Run.objects.all()
    return runs if scope is None else runs.filter(tenant_id__in=scope)


def run_get(*, scope: list[int] | None, run_id: Any) -> Run | None:
    """The run with its job and tenant (one query), or None if unknown or out of scope."""
    try:
        return run_list(scope=scope).select_related("job", "tenant").filter(pk=run_id).first()
    except ValidationError:  # a malformed id is simply not found
        return None


@dataclass
class StepView:
    """A step of a run as the page shows it: its definition, its execution, where it is drawn."""

    name: str
    target: dict[str, Any]
    depends_on: list[str]
    # None only if the step's execution is missing (a run is made with all of them at once).
    execution: Execution | None
    # The upstream steps it still waits for (those not SUCCEEDED), named while it is BLOCKED.
    waits_for: list[str]

    @property
    def state(self) -> str:
        return self.execution.state if self.execution is not None else ""


@dataclass
class RunDetail:
    run: Run
    state: str
    steps: list[StepView]  # in the workflow's order
    graph: Graph

    @property
    def drawn(self) -> list[tuple[Node, StepView]]:
        """Each node of the graph with its step, for the template to draw in one loop."""
        by_name = {step.name: step for step in self.steps}
        return [(node, by_name[node.name]) for node in self.graph.nodes]

    @property
    def succeeded(self) -> int:
        return sum(1 for step in self.steps if step.state == S.SUCCEEDED)

    @property
    def started_at(self) -> datetime | None:
        """When its first step started."""
        return min((e.started_at for e in self._executions if e.started_at), default=None)

    @property
    def finished_at(self) -> datetime | None:
        """When its last step ended, once none can run any more."""
        if self.state in UNFINISHED_RUN_STATES:
            return None
        return max((e.finished_at for e in self._executions if e.finished_at), default=None)

    @property
    def _executions(self) -> list[Execution]:
        return [step.execution for step in self.steps if step.execution is not None]


def run_detail(*, scope: list[int] | None, run: Run) -> RunDetail:
    """The run's steps, each with its execution (one query for all of them), the run's state as
    readmodels.runs.run_state derives it, and the graph's layout."""
    last_event = ExecutionEvent.objects.filter(execution=OuterRef("pk")).order_by("-at", "-id")
    executions = {
        execution.step: execution
        for execution in execution_list(scope=scope)
        .filter(run_id=run.pk)
        # What the page never shows, and may be large: a step's result, traceback, checkpoint.
        .defer("result", "traceback", "checkpoint")
        # Why a step that has no error ended as it did (a cancel names the upstream step that
        # failed): its newest event's message, a probe of event_execution_at per step, in the
        # same query. Shown for a CANCELLED step only, whose history is always rows (a cancel is
        # off the happy path: store/history.py); a step whose history is derived reads None.
        .annotate(last_message=Subquery(last_event.values("message")[:1]))
    }
    states = {name: execution.state for name, execution in executions.items()}
    steps = [
        StepView(
            name=step["name"],
            target=dict(step.get("target") or {}),
            depends_on=list(step.get("depends_on") or []),
            execution=executions.get(step["name"]),
            waits_for=_waits_for(step, states),
        )
        for step in run.steps
    ]
    state = run_state((e.state, e.attempt) for e in executions.values())
    return RunDetail(run=run, state=state, steps=steps, graph=layout(run.steps))


def _waits_for(step: workflow.Step, states: dict[str, str]) -> list[str]:
    if states.get(step["name"]) != S.BLOCKED:
        return []
    return [up for up in step.get("depends_on") or [] if states.get(up) != S.SUCCEEDED]


@dataclass
class RunRow:
    """A line of a job's list of runs."""

    run: Run
    state: str
    succeeded: int
    total: int


def job_runs_page(*, scope: list[int] | None, job: Job, page: int) -> tuple[list[RunRow], bool]:
    """A workflow job's runs, newest first: a walk of run_job_history, offset by page, then the
    states of those runs' steps counted in one grouped query. (rows, has_next). No COUNT(*)."""
    runs = run_list(scope=scope).filter(job=job).defer("steps").order_by("-created_at", "-id")
    start = (page - 1) * PAGE_SIZE
    found = list(runs[start : start + PAGE_SIZE + 1])
    shown = found[:PAGE_SIZE]
    counts: dict[Any, dict[tuple[str, int], int]] = {run.pk: {} for run in shown}
    if shown:
        grouped = (
            execution_list(scope=scope)
            .filter(run_id__in=list(counts))
            .order_by()
            .values("run_id", "state", "attempt")
            .annotate(n=Count("id"))
        )
        for row in grouped:
            counts[row["run_id"]][(row["state"], row["attempt"])] = row["n"]
    rows = [
        RunRow(
            run=run,
            # run_state wants each step's (state, attempt); the distinct pairs present say the same.
            state=run_state(counts[run.pk]),
            succeeded=sum(n for (state, _), n in counts[run.pk].items() if state == S.SUCCEEDED),
            total=sum(counts[run.pk].values()),
        )
        for run in shown
    ]
    return rows, len(found) > PAGE_SIZE


def workflow_steps(job: Job) -> list[dict[str, Any]]:
    """A workflow job's steps as its page lists them (name, target, depends_on); [] for a plain job."""
    if not job.workflow:
        return []
    return [
        {"name": step["name"], "target": step.get("target") or {}, "depends_on": list(step.get("depends_on") or [])}
        for step in job.workflow.get("steps") or []
    ]

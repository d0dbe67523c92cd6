"""A workflow's steps as a graph: pure functions over the definition a job keeps (`Job.workflow`).

The definition is kept in the model's names (jobs/fields.py: what a step may set of its own is
named as the job's field it overrides), each step's target resolved (its pool filled in):

    {"steps": [{"name": "extract", "target": {"pool": "etl", "handler": "extract",
                "rate_limit": "warehouse" or absent}, "payload": {},
                "depends_on": [], "retry_policy": {"max_attempts": 5, …} or absent,
                "timeout_sec": 600 or absent}, …]}

The API names them its own way (`dependsOn`, `retryPolicy.maxAttempts`): the web converts at its
boundary (web/api/workflow_serializers.py). A payload is the handler's document, kept as given.

A run keeps the steps as they were when it began (executions.models.Run.steps), so these
functions take a list of steps, not a job. Nothing here reads the database.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MAX_STEPS = 100

Step = Mapping[str, Any]


def names(steps: Sequence[Step]) -> list[str]:
    return [step["name"] for step in steps]


def upstream(steps: Sequence[Step]) -> dict[str, list[str]]:
    """Each step's name: the names of the steps it depends on directly."""
    return {step["name"]: list(step.get("depends_on") or []) for step in steps}


def downstream(steps: Sequence[Step]) -> dict[str, list[str]]:
    """Each step's name: the names of the steps that depend on it directly, in definition order."""
    below: dict[str, list[str]] = {step["name"]: [] for step in steps}
    for step in steps:
        for name in step.get("depends_on") or []:
            below.setdefault(name, []).append(step["name"])
    return below


def roots(steps: Sequence[Step]) -> list[str]:
    """The steps that depend on nothing: they start when the run does."""
    return [step["name"] for step in steps if not step.get("depends_on")]


def descendants(steps: Sequence[Step], of: Iterable[str]) -> list[str]:
    """Every step that depends on one of `of`, directly or not (not `of` themselves)."""
    below = downstream(steps)
    seen: set[str] = set()
    todo = [child for name in of for child in below.get(name, [])]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(below.get(name, []))
    return [name for name in names(steps) if name in seen]


def find_cycle(steps: Sequence[Step]) -> list[str] | None:
    """A cycle of dependencies as the names along it, first name repeated at the end
    (["a", "b", "a"]), or None when the steps form a DAG. Depth-first, iterative (a chain of
    100 steps must not reach Python's recursion limit)."""
    graph = upstream(steps)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in graph:
        if state.get(start):
            continue
        path: list[str] = []
        stack: list[tuple[str, Any]] = [(start, iter(graph[start]))]
        state[start] = 1
        path.append(start)
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in graph:
                    continue  # an unknown name: validate() says so on its own
                if state.get(child) == 1:
                    return [*path[path.index(child) :], child]
                if not state.get(child):
                    state[child] = 1
                    path.append(child)
                    stack.append((child, iter(graph[child])))
                    break
            else:
                state[node] = 2
                path.pop()
                stack.pop()
    return None


def structure_errors(steps: Sequence[Step]) -> list[str]:
    """What is wrong with the graph: step count, duplicate names, unknown dependencies, a step
    that depends on itself, a cycle (named). Empty when it is a valid DAG. Each step's own fields
    (target, payload, policies) are checked by the API's serializer."""
    if not steps:
        return ["must have at least one step"]
    if len(steps) > MAX_STEPS:
        return [f"has {len(steps)} steps; a workflow may have at most {MAX_STEPS}"]
    errors = []
    seen: set[str] = set()
    for name in names(steps):
        if name in seen:
            errors.append(f"step name '{name}' is used twice; step names must be unique")
        seen.add(name)
    for step in steps:
        for name in step.get("depends_on") or []:
            if name == step["name"]:
                errors.append(f"step '{name}' depends on itself")
            elif name not in seen:
                errors.append(f"step '{step['name']}' depends on '{name}', which is not a step of this workflow")
    if errors:
        return errors
    cycle = find_cycle(steps)
    if cycle:
        return [f"the steps' dependencies form a cycle: {' -> '.join(cycle)}"]
    return []


def step_of(steps: Sequence[Step], name: str) -> Step:
    for step in steps:
        if step["name"] == name:
            return step
    raise KeyError(name)


def ready(steps: Sequence[Step], states: Mapping[str, str], *, succeeded: str, blocked: str) -> list[str]:
    """The blocked steps whose upstream steps have all succeeded (`states`: step name to state)."""
    return [
        name
        for name, above in upstream(steps).items()
        if states.get(name) == blocked and all(states.get(up) == succeeded for up in above)
    ]


def doomed(steps: Sequence[Step], states: Mapping[str, str], *, blocked: str, failed: Iterable[str]) -> dict[str, str]:
    """The blocked steps that can never run because a step above them (directly or not) ended in
    one of `failed`: each name with the failed upstream step it waits on (the nearest, in the
    definition's order), to be named in its cancellation."""
    failed = set(failed)
    graph = upstream(steps)
    cause: dict[str, str] = {}
    for name in names(steps):  # any order: resolved below by walking up
        if states.get(name) != blocked:
            continue
        todo, seen = list(graph[name]), set()
        while todo:
            up = todo.pop(0)
            if up in seen:
                continue
            seen.add(up)
            if states.get(up) in failed:
                cause[name] = up
                break
            todo.extend(graph.get(up, []))
    return cause

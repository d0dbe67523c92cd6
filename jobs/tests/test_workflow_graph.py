"""jobs.workflow: a workflow's steps as a graph, pure (no database). Property tests over random
graphs: a DAG is never said to have a cycle, a cycle is always found and is a real one, the
released steps are exactly those whose upstream steps all succeeded, and a doomed step always has
a failed step above it."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import workflow


def _steps(edges: dict[str, list[str]]) -> list[dict]:
    return [{"name": name, "depends_on": above} for name, above in edges.items()]


@st.composite
def dags(draw, max_steps: int = 12):
    """Steps s0..sn, each depending only on earlier ones: acyclic by construction."""
    count = draw(st.integers(min_value=1, max_value=max_steps))
    names = [f"s{i}" for i in range(count)]
    edges = {
        name: sorted(draw(st.sets(st.sampled_from(names[:i]), max_size=3))) if i else [] for i, name in enumerate(names)
    }
    return _steps(edges)


@given(dags())
def test_a_dag_has_no_cycle_and_no_structure_error(steps):
    assert workflow.find_cycle(steps) is None
    assert workflow.structure_errors(steps) == []


@given(dags(), st.data())
def test_an_edge_back_up_makes_a_cycle_that_is_found_and_real(steps, data):
    # A step with an ancestor: make that ancestor depend on it.
    below = [s for s in steps if s["depends_on"]]
    if not below:
        return
    child = data.draw(st.sampled_from(below))
    parent = data.draw(st.sampled_from(child["depends_on"]))
    for step in steps:
        if step["name"] == parent:
            step["depends_on"] = [*step["depends_on"], child["name"]]

    cycle = workflow.find_cycle(steps)

    assert cycle is not None and cycle[0] == cycle[-1]
    above = workflow.upstream(steps)
    for node, nxt in itertools.pairwise(cycle):
        assert nxt in above[node], (cycle, node, nxt)  # each step depends on the next
    assert workflow.structure_errors(steps)[0].startswith("the steps' dependencies form a cycle: ")


@settings(max_examples=200)
@given(dags(), st.data())
def test_ready_and_doomed_follow_the_upstream_states(steps, data):
    names = workflow.names(steps)
    above = workflow.upstream(steps)
    # States a run can reach, drawn in the steps' order (each depends only on earlier ones): a
    # step whose upstream steps have not all succeeded never started, so it is BLOCKED or, doomed,
    # CANCELLED. (A SUCCEEDED step below a DEAD one cannot happen, and would be both.)
    states: dict[str, str] = {}
    for n in names:
        started = all(states[up] == "SUCCEEDED" for up in above[n])
        choices = ["BLOCKED", "SUCCEEDED", "DEAD", "CANCELLED", "RUNNING"] if started else ["BLOCKED", "CANCELLED"]
        states[n] = data.draw(st.sampled_from(choices))

    ready = set(workflow.ready(steps, states, succeeded="SUCCEEDED", blocked="BLOCKED"))
    doomed = workflow.doomed(steps, states, blocked="BLOCKED", failed={"DEAD", "CANCELLED"})

    for name in names:
        expected = states[name] == "BLOCKED" and all(states[up] == "SUCCEEDED" for up in above[name])
        assert (name in ready) == expected
    for name, cause in doomed.items():
        assert states[name] == "BLOCKED" and states[cause] in ("DEAD", "CANCELLED")
        assert name in workflow.descendants(steps, [cause])
    assert not ready & set(doomed)


def test_the_structure_errors_name_what_is_wrong():
    assert workflow.structure_errors([]) == ["must have at least one step"]
    assert "used twice" in workflow.structure_errors(_steps({"a": [], "b": []}) + _steps({"a": []}))[0]
    assert workflow.structure_errors(_steps({"a": ["a"]})) == ["step 'a' depends on itself"]
    assert "'ghost', which is not a step" in workflow.structure_errors(_steps({"a": ["ghost"]}))[0]
    assert workflow.structure_errors(_steps({f"s{i}": [] for i in range(101)})) == [
        "has 101 steps; a workflow may have at most 100"
    ]


def test_a_chain_of_a_hundred_steps_is_walked_without_recursion():
    chain = _steps({f"s{i}": ([f"s{i - 1}"] if i else []) for i in range(100)})

    assert workflow.find_cycle(chain) is None
    assert workflow.descendants(chain, ["s0"]) == [f"s{i}" for i in range(1, 100)]
    assert workflow.roots(chain) == ["s0"]

"""Every state machine checked by one test (machines/machine.py), and no state written outside its
named transitions.

The tables: each stateful model (a `state` field with choices) has one machine whose states are
the field's choices; every state is reachable from where a row's life begins and can reach an end;
a state with no way out is an end; an end has no way out but the re-openings its table names; every
move of the table is made by a named transition, declared in one of the machine's writers, and
every named transition's moves are in the table.

The guard: an AST scan of the product modules for writes of a machine's guarded columns
(`.update(state=…)`, `obj.state = …`, `update_fields=[…, "state"]`, `setattr(obj, "state", …)`,
SQL that SETs them) anywhere but in the modules the machine names as its writers.
"""

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.apps import apps

from machines import MACHINES, Machine
from tests_architecture.test_shape import ROOT, _product_files


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _machines() -> list[Machine]:
    """Every machine of the product, with all its named transitions declared: each package's
    states module, and the writers each machine names, imported."""
    for path in _product_files():
        if path.name == "states.py":
            importlib.import_module(_module_of(path))
    for machine in list(MACHINES):
        for writer in machine.writers:
            importlib.import_module(writer)
    return list(MACHINES)


def _moves(pairs) -> set:
    return {(source, target) for source, targets in pairs for target in targets}


def test_every_stateful_model_has_one_machine_of_its_states():
    machines = {machine.model: machine for machine in _machines()}
    stateful = {
        model._meta.label: [value for value, _ in field.choices]
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.name == "state" and field.choices
    }

    assert len(machines) == len(MACHINES), "two machines of one model"
    assert {model: list(machine.states) for model, machine in machines.items()} == stateful


@pytest.mark.parametrize("machine", _machines(), ids=repr)
def test_the_table_of_each_machine(machine: Machine):
    states = set(machine.states)
    table = _moves(machine.moves.items())
    assert set(machine.moves) == states, "the table names every state, once"
    assert {target for _, target in table} <= states
    assert machine.initial and machine.initial <= states and machine.terminal <= states

    reached, frontier = set(machine.initial), list(machine.initial)
    while frontier:
        for target in machine.moves[frontier.pop()] - reached:
            reached.add(target)
            frontier.append(target)
    assert reached == states, f"not reachable from {sorted(machine.initial)}: {sorted(states - reached)}"

    for state in states - machine.terminal:
        ends, frontier = set(), [state]
        while frontier:
            for target in machine.moves[frontier.pop()] - ends:
                ends.add(target)
                frontier.append(target)
        assert ends & machine.terminal, f"{state} can never end"
    assert {state for state in states if not machine.moves[state]} <= machine.terminal, "a dead end that is no end"

    out_of_ends = {(source, target) for source, target in table if source in machine.terminal}
    assert machine.reopening <= out_of_ends, "a re-opening that is not a move out of an end"
    assert {(s, t) for s, t in out_of_ends if t not in machine.terminal} <= machine.reopening, (
        "a move out of an end that its table does not name a re-opening"
    )

    declared = _moves((source, [target]) for sources, target in machine.named.values() for source in sources)
    assert declared == table, "every move of the table is made by a named transition, and none other"
    for name, module in machine.modules.items():
        assert any(module == w or module.startswith(w + ".") for w in machine.writers), (name, module)


# --- the guard: no write of a guarded column outside its machine's writers -------------------------

# What an UPDATE assigns: from SET to where its conditions (or its source, or what it returns) begin.
_SQL_SET = re.compile(r"\bSET\b(.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b|$)", re.DOTALL)


def writes(source: str, columns: set[str]) -> list[tuple[int, str]]:
    """(line, column) of each write of one of `columns` in `source` that the scan can see."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in {"update", "update_or_create", "bulk_update"}:
                for keyword in node.keywords:
                    if keyword.arg in columns:
                        found.append((node.lineno, keyword.arg))
                    elif keyword.arg is None and isinstance(keyword.value, ast.Dict):
                        found += [(node.lineno, k.value) for k in keyword.value.keys if _constant_in(k, columns)]
                if func.attr == "bulk_update" and len(node.args) > 1:
                    found += [(node.lineno, c.value) for c in ast.walk(node.args[1]) if _constant_in(c, columns)]
            for keyword in node.keywords:
                if keyword.arg in {"update_fields", "fields"} and isinstance(func, ast.Attribute):
                    if func.attr in {"save", "bulk_update"}:
                        found += [(node.lineno, c.value) for c in ast.walk(keyword.value) if _constant_in(c, columns)]
            if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) > 1:
                if _constant_in(node.args[1], columns):
                    found.append((node.lineno, node.args[1].value))
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and part.attr in columns and isinstance(part.ctx, ast.Store):
                        found.append((node.lineno, part.attr))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for match in _SQL_SET.finditer(node.value):
                assigned = re.findall(r"(?:^|[\s,(])(\w+)\s*=(?!=)", match.group(1))
                found += [(node.lineno, column) for column in assigned if column in columns]
    return found


def _constant_in(node: ast.AST, columns: set[str]) -> bool:
    return isinstance(node, ast.Constant) and node.value in columns


def test_no_state_is_written_outside_the_named_transitions_of_its_machine():
    machines = _machines()
    writers: dict[str, set[str]] = {}
    for machine in machines:
        for column in machine.guarded:
            writers.setdefault(column, set()).update(machine.writers)
    columns = set(writers)
    bare = []
    for path in _product_files():
        module = _module_of(path)
        for line, column in writes(path.read_text(), columns):
            if not any(module == w or module.startswith(w + ".") for w in writers[column]):
                bare.append(f"{path.relative_to(ROOT)}:{line} writes {column}")

    assert not bare, "state written outside a machine's named transitions:\n" + "\n".join(bare)


@pytest.mark.parametrize(
    "source",
    [
        "Job.objects.filter(pk=1).update(state='PAUSED')",
        "rows.update(updated_at=now, **{'state': 'X'})",
        "job.state = JobState.PAUSED\njob.save()",
        "job.save(update_fields=['state', 'updated_at'])",
        "Job.objects.bulk_update(jobs, ['state'])",
        "setattr(alert, 'state', 'RESOLVED')",
        "cursor.execute('UPDATE alerts_alert SET resolved_at = %s, state = %s WHERE id = %s', params)",
        "Execution.objects.filter(pk=1).update(available_at=now)",
    ],
)
def test_the_guard_sees_a_bare_write(source):
    assert writes(source, {"state", "available_at"})


def test_the_guard_lets_reads_and_creations_be():
    source = (
        "Job.objects.filter(state='ACTIVE').update(next_fire_at=None)\n"
        "Alert.objects.create(rule=rule, state='FIRING')\n"
        "cursor.execute('SELECT id FROM jobs_job WHERE state = %s', ['ACTIVE'])\n"
        "total = ExecutionTotal(state=state)\n"
    )
    assert writes(source, {"state", "available_at"}) == []

"""The run graph's layout (dashboard/runs/graph.py): pure geometry, no database."""

from dashboard.runs.graph import NODE_WIDTH, layers, layout


def _steps(*pairs: tuple[str, list[str]]) -> list[dict]:
    return [{"name": name, "target": {"pool": "default", "handler": "noop"}, "depends_on": ups} for name, ups in pairs]


DIAMOND = _steps(("A", []), ("B", ["A"]), ("C", ["A"]), ("D", ["B", "C"]))


def test_a_steps_layer_is_its_longest_path_from_a_root():
    """A diamond A→B, A→C, B+C→D is three layers; a shortcut A→D does not pull D left."""
    assert layers(DIAMOND) == {"A": 0, "B": 1, "C": 1, "D": 2}
    shortcut = _steps(("A", []), ("B", ["A"]), ("C", ["B"]), ("D", ["A", "C"]))
    assert layers(shortcut) == {"A": 0, "B": 1, "C": 2, "D": 3}


def test_columns_run_left_to_right_and_are_centred_on_the_tallest():
    """Every edge points right; B and C share a column, one above the other; A and D sit between
    them vertically."""
    graph = layout(DIAMOND)
    a, b, c, d = (graph.node(name) for name in "ABCD")
    assert a.x < b.x == c.x < d.x
    assert b.y < c.y
    assert a.y == d.y == (b.y + c.y) / 2
    assert {(e.source, e.target) for e in graph.edges} == {("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")}
    assert graph.width >= d.x + NODE_WIDTH


def test_a_column_is_ordered_by_its_upstream_rows_to_avoid_crossings():
    """Two chains given interleaved (x1, y1, y2, x2) keep their rows: x2 follows x1, y2 follows y1."""
    graph = layout(_steps(("x1", []), ("y1", []), ("y2", ["y1"]), ("x2", ["x1"])))
    assert graph.node("x2").row == graph.node("x1").row
    assert graph.node("y2").row == graph.node("y1").row


def test_a_chain_of_a_hundred_steps_needs_no_recursion():
    chain = _steps(("s0", []), *((f"s{i}", [f"s{i - 1}"]) for i in range(1, 100)))
    assert layers(chain)["s99"] == 99


def test_a_bad_graph_is_drawn_rather_than_failing():
    """A run's steps were validated, but the page must not fail on an unknown name or a cycle."""
    assert layers(_steps(("a", ["ghost"]), ("b", ["a"]))) == {"a": 0, "b": 1}
    assert layers(_steps(("a", []), ("b", ["c"]), ("c", ["b"]))) == {"a": 0, "b": 1, "c": 1}
    assert layout([]).nodes == []

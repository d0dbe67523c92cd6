"""A workflow run drawn as a graph: where each step's box goes and how the arrows between them run.

Pure geometry over a run's steps (jobs/workflow.py's shape); nothing here reads the database or
knows about states. The run page renders the result as inline SVG on the server, so the graph
needs no script, no third-party library, and refreshes with the rest of the page when the live
feed reports a change.

Layout, left to right: a step's column (its layer) is the length of the longest path to it from a
root, so every arrow points right and a step stands to the right of everything it waits for.
Within a column, steps start in the definition's order and are then sorted once by the mean row
of their upstream steps (a barycentre sweep): cheap, and it straightens the common shapes
(chains, fans, diamonds) without a crossing-minimisation library. Each column is centred
vertically on the tallest one.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from jobs import workflow

NODE_WIDTH = 176
NODE_HEIGHT = 54
COLUMN_GAP = 56
ROW_GAP = 14
PADDING = 8
# A name longer than this is cut in the box (the full name is in its tooltip and the table).
LABEL_CHARS = 22


@dataclass(frozen=True)
class Node:
    name: str
    layer: int
    row: int
    x: float
    y: float

    @property
    def label(self) -> str:
        return self.name if len(self.name) <= LABEL_CHARS else self.name[: LABEL_CHARS - 1] + "…"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    # An SVG path: a cubic curve from the source's right side to the target's left side.
    path: str


@dataclass(frozen=True)
class Graph:
    nodes: list[Node]  # in the definition's order
    edges: list[Edge]
    width: float
    height: float
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)


def layers(steps: Sequence[workflow.Step]) -> dict[str, int]:
    """Each step's layer: the number of edges on the longest path from a root to it. Kahn's order,
    so a chain of 100 steps costs no recursion. A dependency on an unknown name is ignored, and a
    step caught in a cycle (a run's steps were validated, so neither should occur) is put one
    layer past the rest rather than failing the page."""
    above = {name: [up for up in ups if up != name] for name, ups in workflow.upstream(steps).items()}
    below = workflow.downstream(steps)
    waiting = {name: sum(1 for up in ups if up in above) for name, ups in above.items()}
    layer = {name: 0 for name in above}
    ready = [name for name in above if waiting[name] == 0]
    done: set[str] = set()
    while ready:
        name = ready.pop(0)
        done.add(name)
        for child in below.get(name, []):
            if child not in waiting or child == name:
                continue
            layer[child] = max(layer[child], layer[name] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(done) < len(above):
        past = max((layer[name] for name in done), default=-1) + 1
        for name in above:
            if name not in done:
                layer[name] = past
    return layer


def layout(steps: Sequence[workflow.Step]) -> Graph:
    """Where each step's box goes, and the arrows from each step to the steps that depend on it."""
    layer_of = layers(steps)
    order = workflow.names(steps)
    columns: dict[int, list[str]] = {}
    for name in order:
        columns.setdefault(layer_of[name], []).append(name)
    above = workflow.upstream(steps)
    row_of: dict[str, int] = {}
    for number in sorted(columns):
        column = columns[number]
        if number > 0:
            column = columns[number] = _by_barycentre(column, above, row_of)
        for row, name in enumerate(column):
            row_of[name] = row
    tallest = max((len(column) for column in columns.values()), default=0)
    step_x, step_y = NODE_WIDTH + COLUMN_GAP, NODE_HEIGHT + ROW_GAP
    nodes = {}
    for name in order:
        shift = (tallest - len(columns[layer_of[name]])) * step_y / 2
        nodes[name] = Node(
            name=name,
            layer=layer_of[name],
            row=row_of[name],
            x=PADDING + layer_of[name] * step_x,
            y=PADDING + shift + row_of[name] * step_y,
        )
    edges = [
        Edge(source=up, target=name, path=_curve(nodes[up], nodes[name]))
        for name in order
        for up in above[name]
        if up in nodes and up != name
    ]
    width = 2 * PADDING + (len(columns) * step_x - COLUMN_GAP if columns else 0)
    height = 2 * PADDING + (tallest * step_y - ROW_GAP if tallest else 0)
    return Graph(nodes=list(nodes.values()), edges=edges, width=width, height=height)


def _by_barycentre(column: list[str], above: dict[str, list[str]], row_of: dict[str, int]) -> list[str]:
    """The column sorted by the mean row of each step's upstream steps (all in earlier columns,
    so already placed); ties keep the definition's order."""
    position = {name: i for i, name in enumerate(column)}

    def key(name: str) -> tuple[float, int]:
        rows = [row_of[up] for up in above[name] if up in row_of]
        return (sum(rows) / len(rows) if rows else float(position[name]), position[name])

    return sorted(column, key=key)


def _curve(source: Node, target: Node) -> str:
    x1, y1 = source.x + NODE_WIDTH, source.y + NODE_HEIGHT / 2
    # Stop short of the box, so the arrowhead's tip touches its edge.
    x2, y2 = target.x - 4, target.y + NODE_HEIGHT / 2
    bend = max((x2 - x1) / 2, COLUMN_GAP / 2)
    return f"M{x1:g} {y1:g} C{x1 + bend:g} {y1:g} {x2 - bend:g} {y2:g} {x2:g} {y2:g}"

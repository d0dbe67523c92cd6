"""The mechanism itself: a named transition is checked against its table when it is declared,
once per name, and refuses a source it does not accept. (Every product machine's table is checked
in tests_architecture/test_state_machines.py.)"""

import pytest

from machines import MACHINES, InvalidMove, Machine


@pytest.fixture
def door():
    machine = Machine(
        model="tests.Door",
        states=["OPEN", "SHUT", "GONE"],
        moves={"OPEN": {"SHUT"}, "SHUT": {"OPEN", "GONE"}, "GONE": set()},
        initial={"SHUT"},
        terminal={"GONE"},
        writers=[__name__],
    )
    yield machine
    MACHINES.remove(machine)  # not a machine of the product


def test_a_named_transition_declares_its_moves(door):
    @door.transition(["OPEN"], "SHUT")
    def shut():
        return "shut"

    assert door.named == {"shut": (frozenset({"OPEN"}), "SHUT")}
    assert door.modules == {"shut": __name__}
    assert door.sources("shut") == ["OPEN"] and door.target("shut") == "SHUT"
    assert shut() == "shut"


def test_a_move_the_table_does_not_allow_fails_when_it_is_declared(door):
    with pytest.raises(InvalidMove, match=r"tests\.Door: no move from GONE to OPEN"):
        door.transition(["SHUT", "GONE"], "OPEN")
    assert door.named == {}


def test_two_named_transitions_of_one_name_are_refused(door):
    door.transition(["OPEN"], "SHUT")(lambda: None)
    with pytest.raises(InvalidMove, match="two named transitions called <lambda>"):
        door.transition(["SHUT"], "OPEN")(lambda: None)


def test_a_named_transition_refuses_a_source_it_does_not_accept(door):
    door.transition(["SHUT"], "GONE")(remove := lambda: None)
    door.accepts("<lambda>", "SHUT")
    with pytest.raises(InvalidMove):
        door.accepts("<lambda>", "OPEN")
    assert remove() is None


def test_a_machine_refuses_with_its_own_error():
    class Refused(InvalidMove):
        def __init__(self, source: str, target: str) -> None:
            super().__init__(f"nope: {source} → {target}")

    machine = Machine(
        model="tests.Other",
        states=["A", "B"],
        moves={"A": {"B"}, "B": set()},
        initial={"A"},
        terminal={"B"},
        writers=[],
        refuse=Refused,
    )
    try:
        with pytest.raises(Refused, match="nope: B → A"):
            machine.check("B", "A")
        assert machine.allows("A", "B") and not machine.allows("B", "A")
    finally:
        MACHINES.remove(machine)

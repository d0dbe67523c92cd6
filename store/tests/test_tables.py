"""What the store knows of the state table above it stays what the table says."""

from executions.states import TERMINAL
from store import tables


def test_the_store_names_the_finished_states_as_the_state_table_does():
    assert tables.FINISHED == {state.value for state in TERMINAL}

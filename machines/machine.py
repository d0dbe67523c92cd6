"""One mechanism for every state machine (executions, jobs, alerts, notifications): a table of
the moves allowed between a model's states, and the named transitions that make them.

A package's `states.py` declares its machine: the states, the table, where a row's life begins
(`initial`), where it ends (`terminal`), and which moves out of an end re-open it (`reopening`,
an operator's explicit act: a re-drive, a trigger). Its transitions module declares each named
transition with `@machine.transition(sources, target)`, which checks the moves against the table
when the module is imported: a transition the table does not allow is refused before anything
runs. The named transitions are the only writers of the state (`writers`: the modules that hold
them); tests_architecture/test_state_machines.py checks every machine's table the same way and
that nothing else writes a state.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

State = TypeVar("State", bound=str)
F = TypeVar("F", bound=Callable[..., Any])

# Every machine declared, in the order its states module was imported: what the table test reads.
MACHINES: list["Machine[Any]"] = []


class InvalidMove(Exception):
    """A move the table does not allow (or a named transition asked of a state it does not accept)."""


class Machine(Generic[State]):
    """The table of one model's state field, and the named transitions declared against it."""

    def __init__(
        self,
        *,
        model: str,
        states: Iterable[State],
        moves: Mapping[State, Iterable[State]],
        initial: Iterable[State],
        terminal: Iterable[State],
        writers: Sequence[str],
        reopening: Iterable[tuple[State, State]] = (),
        guarded: Sequence[str] = ("state",),
        refuse: Callable[[str, str], Exception] | None = None,
    ) -> None:
        self.model = model  # "app_label.Model", whose `state` field this machine writes
        self.states = tuple(states)
        self.moves: dict[State, frozenset[State]] = {source: frozenset(targets) for source, targets in moves.items()}
        self.initial = frozenset(initial)
        self.terminal = frozenset(terminal)
        self.reopening = frozenset(reopening)
        # The modules (dotted; a package covers its modules) that hold its named transitions and
        # the statements they run: the only ones that may write the `guarded` columns.
        self.writers = tuple(writers)
        self.guarded = tuple(guarded)
        # Per named transition: the source states it accepts and the state it moves to.
        self.named: dict[str, tuple[frozenset[State], State]] = {}
        self.modules: dict[str, str] = {}  # and the module that holds it
        self._refuse = refuse or (lambda source, target: InvalidMove(f"{model}: no move from {source} to {target}"))
        MACHINES.append(self)

    def __repr__(self) -> str:
        return f"Machine({self.model})"

    def allows(self, source: str, target: str) -> bool:
        return target in self.moves.get(source, frozenset())  # type: ignore[arg-type]

    def check(self, source: str, target: str) -> None:
        """Raise (the machine's refusal) unless the table allows source → target."""
        if not self.allows(source, target):
            raise self._refuse(source, target)

    def transition(self, sources: Sequence[State], target: State) -> Callable[[F], F]:
        """Declare a named transition: the moves it makes, each checked against the table now."""
        for source in sources:
            self.check(source, target)

        def declare(function: F) -> F:
            name = function.__name__
            if name in self.named:
                raise InvalidMove(f"{self.model}: two named transitions called {name}")
            self.named[name] = (frozenset(sources), target)
            self.modules[name] = function.__module__
            return function

        return declare

    def sources(self, name: str) -> list[State]:
        """The states the named transition `name` accepts, in the order of the states."""
        accepted = self.named[name][0]
        return [state for state in self.states if state in accepted]

    def target(self, name: str) -> State:
        return self.named[name][1]

    def accepts(self, name: str, source: str) -> None:
        """Raise (the machine's refusal) unless the named transition `name` accepts `source`."""
        sources, target = self.named[name]
        if source not in sources:
            raise self._refuse(source, target)

"""State machines as tables (machine.py): each stateful model's states module declares its
allowed moves with `Machine`, and its named transitions declare the moves they make against it.
On the ground floor, beside telemetry, so that every layer can declare one."""

from machines.machine import MACHINES, InvalidMove, Machine

__all__ = ["MACHINES", "InvalidMove", "Machine"]

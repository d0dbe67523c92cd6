"""How much of each pool's work may wait on the broker beyond its worker slots.

What waits on the broker is past the fair order (a broker queue is first come, first served),
so the less the better; but a worker slot that frees with nothing on the broker idles until the
dispatcher's next claim. The floor is `headroom`: slots * (headroom - 1) messages. For short
runs that is not enough (a slot empties many times between two claims), so the buffer adapts,
per pool, between claims of a dispatcher:
- it doubles when the pool left due work waiting at the last claim and now has nothing queued
  and a slot idle: the workers ran dry;
- it shrinks by a quarter when more than half of it is still queued: more than needed.
So it settles near what the pool's workers run between two claims, and a newcomer's execution
waits behind about that much, not behind a backlog."""

import math

from executions.admission import Load


class BrokerBuffer:
    def __init__(self, *, headroom: float, most: int) -> None:
        self.headroom = headroom
        self.most = most
        self.sizes: dict[str, float] = {}
        self.held_back: set[str] = set()

    def limit(self, pool: str, load: Load) -> int:
        """What `pool` may have admitted (QUEUED + RUNNING) now."""
        floor = math.ceil(load.slots * max(self.headroom - 1, 0))
        size = self.sizes.get(pool, floor)
        if pool in self.held_back and load.queued == 0 and load.running < load.slots:
            size = max(size * 2, 1)
        elif load.queued > size / 2:
            size *= 0.75
        size = min(max(size, floor), max(floor, self.most))
        self.sizes[pool] = size
        return load.slots + math.ceil(size)

    def claimed(self, held_back: set[str]) -> None:
        """The claim just made left due work waiting in `held_back`."""
        self.held_back = held_back

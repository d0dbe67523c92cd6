"""How much of each pool's work may wait on the broker beyond its worker slots.

What waits on the broker is past the fair order (a broker queue is first come, first served),
so the less the better; but a worker slot that frees with nothing on the broker idles until the
dispatcher's next claim. So each pool may have, beyond its slots:
- at least slots * (headroom - 1) messages;
- at least what its workers take in `window` seconds at the rate they last reported (the
  registry's `rate`): about two of the dispatcher's looks while it holds work back, so a pool of
  short runs is not held back at a load its workers carry, and a newcomer waits behind about
  that much, never behind a backlog;
- more while it runs dry: the buffer doubles when the pool left due work waiting at the last
  claim and now has less queued than it has slots (the workers took nearly all there was: a
  slot that frees now may idle; busy slots do not tell, as a run whose outcome is being
  recorded is still RUNNING), and shrinks by a quarter, down to the two floors above, when more
  than half of it is still queued at the next look;
- never more than HORIZON seconds of work at the workers' reported rate (but the floors), so a
  newcomer waits behind at most about that much whatever the runs' length.
"""

import math

from scheduling.admission import Load

# Seconds of the workers' work (at their reported rate) that may wait on the broker at most.
HORIZON = 0.5


class BrokerBuffer:
    def __init__(self, *, headroom: float, most: int, window: float = 0.0) -> None:
        self.headroom = headroom
        self.most = most
        self.window = window
        self.sizes: dict[str, float] = {}
        self.held_back: set[str] = set()

    def limit(self, pool: str, load: Load) -> int:
        """What `pool` may have admitted (QUEUED + RUNNING) now."""
        floor = max(math.ceil(load.slots * max(self.headroom - 1, 0)), math.ceil(load.rate * self.window))
        size = self.sizes.get(pool, floor)
        if pool in self.held_back and load.queued < max(load.slots, 1):
            size = max(size * 2, 1)
        elif load.queued > size / 2:
            size *= 0.75
        ceiling = max(floor, self.most)
        if load.rate > 0:
            # Never more than HORIZON seconds of the workers' work: for long runs the doubling
            # would pile up seconds of it ahead of a newcomer (0.5 s runs on two slots: 2 s).
            ceiling = min(ceiling, max(floor, math.ceil(load.rate * HORIZON)))
        size = min(max(size, floor), ceiling)
        self.sizes[pool] = size
        return load.slots + math.ceil(size)

    def claimed(self, held_back: set[str]) -> None:
        """The claim just made left due work waiting in `held_back`."""
        self.held_back = held_back

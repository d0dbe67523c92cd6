"""Whose turn it is: start-time fair queuing over tenants (Goyal, Vin and Cheng, 1996).

Each tenant has, per pool, a finish tag. Its next start is tagged max(the pool's virtual time,
its finish tag), and each start moves its tag on by 1 / weight. Starts go to the smallest tags
first (ties: the older due work, then the tenant id). So over any contended stretch each tenant
with due work gets starts in proportion to its weight, whatever the length of anyone's backlog;
a tenant that was idle comes back at the pool's virtual time (the tag of the last start given),
ahead of every backlog but unable to claim the turns it did not use.

Pure logic, no database: the claim (scheduling/admission.py) feeds it what it read and writes
back the tags it ends with."""

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass
class Share:
    """A tenant's standing in one pool during one claim."""

    weight: int
    finish_tag: float
    allowance: int  # starts it may still get: its concurrency limit less what it has admitted


@dataclass(frozen=True)
class Contender:
    """A tenant with due work at the level being filled."""

    tenant_id: int
    earliest: datetime  # its earliest due time at this level: of two equal tags, older work first


class FairShare:
    def __init__(self, virtual_time: float, shares: dict[int, Share]) -> None:
        self.virtual_time = virtual_time
        self.shares = shares

    def start_tag(self, tenant_id: int) -> float:
        return max(self.virtual_time, self.shares[tenant_id].finish_tag)

    def allocate(self, free: int, contenders: Iterable[Contender]) -> list[int]:
        """The next `free` starts among `contenders`, as the tenant id of each, in fair order.
        Nothing is recorded: the caller fetches that many executions of each tenant and
        `record`s what it got (a tenant may have fewer due than it was offered)."""
        heap = []
        left = {}
        for c in contenders:
            share = self.shares[c.tenant_id]
            if share.allowance > 0:
                heap.append((self.start_tag(c.tenant_id), c.earliest, c.tenant_id))
                left[c.tenant_id] = share.allowance
        heapq.heapify(heap)
        order: list[int] = []
        while heap and len(order) < free:
            tag, earliest, tenant_id = heapq.heappop(heap)
            order.append(tenant_id)
            left[tenant_id] -= 1
            if left[tenant_id] > 0:
                heapq.heappush(heap, (tag + 1 / self.shares[tenant_id].weight, earliest, tenant_id))
        return order

    def record(self, starts: dict[int, int]) -> None:
        """These tenants had this many executions admitted: each one's tag moves on by starts /
        weight, and the pool's virtual time to the tag of the last start given, if that is later.
        All at once: every start was tagged against the virtual time the allocation saw."""
        last = self.virtual_time
        for tenant_id, count in starts.items():
            if count <= 0:
                continue
            share = self.shares[tenant_id]
            first = self.start_tag(tenant_id)
            share.finish_tag = first + count / share.weight
            share.allowance -= count
            last = max(last, first + (count - 1) / share.weight)
        self.virtual_time = last

"""The claim's reads and writes on the embedded default (SQLite): portable SQL, one writer at a
time, a loop where PostgreSQL would probe in one statement (scheduling/admission.py decides;
these fetch and record)."""

from collections.abc import Mapping, Sequence
from datetime import datetime

from django.db import models

from pools.models import PoolClock, TenantShare
from store import tables
from store.admitted import AdmittedCounts
from store.rows import DueRow, due_row
from store.sqlite import queries


class SqliteAdmission(AdmittedCounts):
    # A worker's pools as rows (the snapshot's {pools_of}).
    POOLS_OF = "json_each(w.pools) AS j"

    def pools_with_due(self, pools: Sequence[str], *, now: datetime) -> set[str]:
        """Of `pools`, those with a PENDING execution due by `now`: a probe each, in process."""
        return {pool for pool in pools if self.fetch(queries.POOL_HAS_DUE, [pool, now])}

    def claim_pool(self, pool: str, *, seen: int, counts: tuple[int, int]) -> tuple[int, int] | None:
        """`counts`: claims take turns already, as SQLite has one writer at a time, and the claim's
        transaction (it begins IMMEDIATE) has held it since before its snapshot."""
        return counts

    def hold_tenants(self, tenant_ids: Sequence[int]) -> dict[int, int]:
        return self.tenants_admitted(tenant_ids)

    def due_in_pool(self, *, pool: str, now: datetime, limit: int) -> list[DueRow]:
        """Up to `limit` executions of active jobs due in `pool` by `now`: HIGH priority first,
        then by due time."""
        rows = self.fetch(
            queries.DUE_IN_POOL,
            [pool, now, limit],
        )
        return [due_row(row) for row in rows]

    def shares(self, *, pool: str) -> tuple[float, list[tuple[int, int, int | None, float]]]:
        """The pool's virtual time, and for every tenant (id, weight, concurrency limit, finish
        tag in this pool)."""
        clock = PoolClock.objects.filter(pool=pool).values_list("virtual_time", flat=True).first()
        rows = self.fetch(
            queries.SHARES,
            [pool],
        )
        return clock or 0.0, [(t, w, cap, float(tag)) for t, w, cap, tag in rows]

    def due_heads(
        self, *, pool: str, priority: int, tenant_ids: Sequence[int], now: datetime
    ) -> list[tuple[int, datetime]]:
        """(tenant id, earliest due time) for each of `tenant_ids` that has due work in `pool`
        at `priority`."""
        if not tenant_ids:
            return []
        rows = (
            tables.execution()
            ._default_manager.filter(
                state="PENDING",
                pool=pool,
                priority=priority,
                available_at__lte=now,
                tenant_id__in=tenant_ids,
                job__state="ACTIVE",
            )
            .values_list("tenant_id")
            .annotate(earliest=models.Min("available_at"))
            .order_by()
        )
        return list(rows)

    def due_of_tenants(self, *, pool: str, priority: int, quotas: Mapping[int, int], now: datetime) -> list[DueRow]:
        """For each tenant, up to its quota of its executions due in `pool` at `priority`, in
        due order."""
        rows = []
        for tenant_id, quota in quotas.items():
            rows += self.fetch(
                queries.DUE_OF_TENANT,
                [pool, priority, tenant_id, now, quota],
            )
        return [due_row(row) for row in rows]

    def save_shares(self, *, pool: str, finish_tags: Mapping[int, float], virtual_time: float) -> None:
        """Write the tags the claim moved on."""
        if finish_tags:
            TenantShare.objects.bulk_create(
                [TenantShare(pool=pool, tenant_id=t, finish_tag=tag) for t, tag in finish_tags.items()],
                update_conflicts=True,
                unique_fields=["tenant", "pool"],
                update_fields=["finish_tag"],
            )
        PoolClock.objects.bulk_create(
            [PoolClock(pool=pool, virtual_time=virtual_time)],
            update_conflicts=True,
            unique_fields=["pool"],
            update_fields=["virtual_time"],
        )

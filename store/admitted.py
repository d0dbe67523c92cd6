"""What a claim reads of what is admitted once it holds its locks (scheduling/admission.py):
portable SQL, the same on both stores, under each store's claim statements."""

from collections.abc import Sequence

from store import queries
from store.statements import Statements


class AdmittedCounts(Statements):
    def pool_admitted(self, pool: str) -> tuple[int, int]:
        """`pool`'s (QUEUED, RUNNING)."""
        ((queued, running),) = self.fetch(queries.POOL_ADMITTED, [pool])
        return int(queued), int(running)

    def tenants_admitted(self, tenant_ids: Sequence[int]) -> dict[int, int]:
        """Each of `tenant_ids`' QUEUED + RUNNING in every pool (absent: none)."""
        if not tenant_ids:
            return {}
        sql = queries.TENANTS_ADMITTED.format(ids=", ".join(["%s"] * len(tenant_ids)))
        return {tenant: count for tenant, count in self.fetch(sql, list(tenant_ids))}

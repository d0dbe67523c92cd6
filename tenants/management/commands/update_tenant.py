from django.core.management.base import BaseCommand, CommandError

from tenants.management.quota_arguments import add_quota_arguments, describe, quota_changes
from tenants.selectors import tenant_get
from tenants.services import tenant_update_quotas


class Command(BaseCommand):
    help = "Change a tenant's quotas; 'none' clears a limit. The next claim of work applies them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the tenant to change")
        add_quota_arguments(parser)

    def handle(self, *args, slug: str, **options) -> None:
        tenant = tenant_get(slug=slug)
        if tenant is None:
            raise CommandError(f"no tenant '{slug}'")
        changes = quota_changes(options)
        if not changes:
            raise CommandError("nothing to change: give --weight, --max-concurrent, --max-active-jobs or --submit-rate")
        tenant = tenant_update_quotas(tenant=tenant, **changes)
        self.stdout.write(f"updated tenant {tenant.slug}: {describe(tenant)}")

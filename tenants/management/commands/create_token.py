from django.core.management.base import BaseCommand, CommandError

from tenants.selectors import tenant_get
from tenants.services import token_create


class Command(BaseCommand):
    help = "Create an API token for a tenant and print it once (only its hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the tenant the token acts for")
        parser.add_argument(
            "--name", default="", help="what the token is for (e.g. deploy): the audit log and job versions name it"
        )

    def handle(self, *args, slug: str, name: str, **options) -> None:
        tenant = tenant_get(slug=slug)
        if tenant is None:
            raise CommandError(f"no tenant '{slug}'; create it with create_tenant {slug}")
        _, raw = token_create(tenant=tenant, name=name)
        self.stdout.write(raw)

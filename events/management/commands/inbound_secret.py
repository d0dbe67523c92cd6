from django.core.management.base import BaseCommand, CommandError

from executions.clock import db_now
from tenants.selectors import tenant_get
from tenants.services import inbound_secret_ensure, inbound_secret_rotate


class Command(BaseCommand):
    help = (
        "Print the secret a tenant's inbound webhooks (POST /v1/hooks/SLUG/EVENT) are signed with, making one if "
        "it has none. --rotate makes a new one and prints it; the old one still verifies for an hour."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the tenant whose inbound secret to print")
        parser.add_argument("--rotate", action="store_true", help="replace the secret (the old one lasts an hour)")

    def handle(self, *args, slug: str, rotate: bool, **options) -> None:
        tenant = tenant_get(slug=slug)
        if tenant is None:
            raise CommandError(f"no tenant '{slug}'; create it with create_tenant {slug}")
        # The rotation's time is the database's, as the webhooks' check of it is (executions.clock).
        secret = inbound_secret_rotate(tenant=tenant, now=db_now()) if rotate else inbound_secret_ensure(tenant=tenant)
        self.stdout.write(secret)

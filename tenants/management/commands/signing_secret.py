from django.core.management.base import BaseCommand, CommandError
from django.db.models.functions import Now

from tenants.models import Tenant
from tenants.services import signing_secret_rotate


class Command(BaseCommand):
    help = (
        "Print the secret a tenant's http jobs and alert webhooks are signed with (X-Tickwork-Signature), for "
        "their receivers to verify with; nothing else is written to stdout. --rotate makes a new one and prints "
        "it; for a day what is sent carries a signature with each, so receivers verify with either meanwhile."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the tenant whose secret to print")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the secret (the old one still signs for a day)"
        )

    def handle(self, *args, slug: str, rotate: bool, **options) -> None:
        # The database's time, read with the tenant: the rotation's day is judged by that clock
        # when the worker and the alerter sign (tenants.selectors.signing_secrets_now).
        tenant = Tenant.objects.annotate(db_now=Now()).filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"no tenant '{slug}'; create it with create_tenant {slug}")
        secret = signing_secret_rotate(tenant=tenant, now=tenant.db_now) if rotate else tenant.signing_secret
        self.stdout.write(secret)

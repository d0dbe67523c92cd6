from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError

from tenants.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug: str, name: str, **options) -> None:
        try:
            tenant = tenant_create(slug=slug, name=name)
        except IntegrityError as exc:
            raise CommandError(f"tenant '{slug}' already exists") from exc
        self.stdout.write(f"created tenant {tenant.slug}")

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from tenants.management.quota_arguments import add_quota_arguments, describe, quota_changes
from tenants.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant, with its quotas (unlimited and weight 1 unless given)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the tenant's short name: letters, digits, '-' and '_' (e.g. acme)")
        parser.add_argument("--name", default="", help="its display name (default: none)")
        add_quota_arguments(parser)

    def handle(self, *args, slug: str, name: str, **options) -> None:
        try:
            validate_slug(slug)
        except ValidationError as exc:
            raise CommandError(f"'{slug}' is not a slug: use letters, digits, '-' and '_'") from exc
        try:
            # A savepoint, so a duplicate leaves any surrounding transaction usable.
            with transaction.atomic():
                tenant = tenant_create(slug=slug, name=name, **quota_changes(options))
        except IntegrityError as exc:
            raise CommandError(f"tenant '{slug}' already exists") from exc
        self.stdout.write(f"created tenant {tenant.slug}: {describe(tenant)}")

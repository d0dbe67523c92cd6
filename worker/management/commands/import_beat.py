from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from audit.services import cli_actor
from executions.clock import db_now
from tenants.selectors import tenant_get
from worker import beat_import
from worker.celery_bridge import bridges


class Command(BaseCommand):
    help = (
        "Create one Tickwork job per django-celery-beat PeriodicTask in the database at --from, sending "
        "its task through a Celery bridge; a second run updates those jobs (README, 'Migrating from "
        "django-celery-beat')."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--from", dest="source", required=True, metavar="DATABASE_URL", help="beat's database")
        parser.add_argument("--tenant", required=True, metavar="SLUG", help="the tenant the jobs are created in")
        parser.add_argument(
            "--bridge", required=True, metavar="NAME", help="a bridge of TICKWORK_CELERY_BRIDGES: the jobs' Celery app"
        )
        parser.add_argument("--dry-run", action="store_true", help="report what would happen, and write nothing")
        parser.add_argument(
            "--disable-source",
            action="store_true",
            help="set enabled = false on the imported tasks in beat's database, so beat and Tickwork never both fire",
        )

    def handle(self, *args, source: str, tenant: str, bridge: str, dry_run: bool, disable_source: bool, **options):
        found = tenant_get(slug=tenant)
        if found is None:
            raise CommandError(f"no tenant '{tenant}'; create it with create_tenant {tenant}")
        if bridge not in bridges():
            known = ", ".join(sorted(bridges())) or "none"
            raise CommandError(f"no bridge '{bridge}' in TICKWORK_CELERY_BRIDGES (configured: {known})")
        try:
            tasks = beat_import.read_source(source)
        except DatabaseError as exc:
            raise CommandError(f"cannot read django-celery-beat's tables at --from: {exc}".strip()) from None
        now = db_now()
        outcomes = beat_import.import_tasks(
            tasks=tasks, tenant=found, bridge=bridge, now=now, dry_run=dry_run, actor=cli_actor()
        )
        for outcome in outcomes:
            self.stdout.write(outcome.line)
        counts = {
            verb: sum(o.verb == verb for o in outcomes) for verb in ("created", "updated", "unchanged", "skipped")
        }
        summary = ", ".join(f"{n} {verb}" for verb, n in counts.items())
        self.stdout.write(f"{len(outcomes)} tasks: {summary}" + (" (dry run: nothing written)" if dry_run else ""))
        if disable_source and not dry_run:
            imported = [o.task.id for o in outcomes if o.verb != "skipped"]
            disabled = beat_import.disable_source(source, imported, now=now)
            self.stdout.write(
                f"disabled {disabled} imported tasks in beat's database; restart celery beat so that it stops "
                "firing them (skipped tasks stay enabled there)"
            )
        elif disable_source:
            self.stdout.write("--disable-source: nothing disabled in a dry run")

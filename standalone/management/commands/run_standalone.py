import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connections

from jobs import registry
from standalone.supervisor import Supervisor, role_commands
from tenants.selectors import tenant_get
from tenants.services import tenant_create, token_create

DEMO_TENANT = "demo"


class Command(BaseCommand):
    help = "Run every Tickwork role on this machine (web, dispatcher, sweeper, worker), supervised."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="the address the web role listens on (default 127.0.0.1: this machine only)",
        )
        parser.add_argument("--port", type=int, default=8000, help="the web role's port (default 8000)")
        parser.add_argument(
            "--concurrency",
            type=int,
            default=int(os.environ.get("TICKWORK_WORKER_CONCURRENCY", "2")),
            help="the worker's processes: how many runs at once (default TICKWORK_WORKER_CONCURRENCY, else 2)",
        )

    def handle(self, *args, host: str, port: int, concurrency: int, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        credentials = self._first_run_setup()
        base = f"http://{host}:{port}"
        self.stdout.write(
            "\nTickwork is starting:\n"
            f"  API         {base}/v1/   (docs {base}/v1/docs)\n"
            f"  dashboard   {base}/dashboard/\n"
            f"  admin       {base}/admin/\n"
            f"  database    {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}"
            f" + broker {settings.CELERY_BROKER_URL.split('://')[0]}\n"
            f"{credentials}"
            f"  logs        {settings.VAR_DIR / 'logs'}\n"
            "Press Ctrl-C to stop.\n"
        )
        self.stdout.flush()
        log_dir = settings.VAR_DIR / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "scheduler_project.settings"}
        children = role_commands(host=host, port=port, pools=registry.pools(), concurrency=concurrency)
        connections.close_all()  # the supervisor needs the database no more; its roles have their own
        Supervisor(children, env=env, log_dir=log_dir).run()

    def _first_run_setup(self) -> str:
        """On the first run, a demo tenant with a token and an admin login. The credentials are
        also kept in var/ (readable by this user only) so that later runs can show them again."""
        path = settings.VAR_DIR / "standalone-credentials.txt"
        if tenant_get(slug=DEMO_TENANT) is not None:
            if path.exists():
                return path.read_text()
            return f"  (demo tenant exists; make a token with: python manage.py create_token {DEMO_TENANT})\n"
        tenant = tenant_create(slug=DEMO_TENANT, name="Demo")
        _, token = token_create(tenant=tenant, name="standalone")
        password = secrets.token_urlsafe(12)
        User = get_user_model()
        if not User.objects.filter(username="admin").exists():
            user = User.objects.create_superuser("admin", "admin@localhost", password)
            tenant.members.add(user)
            login = f"  admin login admin / {password}\n"
        else:
            login = "  admin login: the existing 'admin' user\n"
        text = f"  demo token  {token}\n{login}"
        path.write_text(text)
        path.chmod(0o600)
        return text

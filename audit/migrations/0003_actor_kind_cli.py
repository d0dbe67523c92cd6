"""The command line as a way an action comes in (`manage.py jobs …`, `import_beat`). Only the
field's choices change: no SQL on either database, so SQLite does not rebuild the table (which
would drop the append-only triggers)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_actor_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditentry",
            name="actor_kind",
            field=models.CharField(
                blank=True,
                choices=[("dashboard", "Dashboard"), ("api", "Api"), ("admin", "Admin"), ("cli", "Cli")],
                max_length=10,
                null=True,
            ),
        ),
    ]

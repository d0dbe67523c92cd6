"""Which way an action came in (dashboard, API, admin), for the audit page's filter. Nullable and
without a default on purpose: adding it is then a plain ALTER TABLE ADD COLUMN on both databases
(a default makes SQLite rebuild the table, which would drop the append-only triggers), and the
rows already there, all dashboard actions, keep NULL since the trigger refuses an UPDATE."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="actor_kind",
            field=models.CharField(
                blank=True,
                choices=[("dashboard", "Dashboard"), ("api", "Api"), ("admin", "Admin")],
                max_length=10,
                null=True,
            ),
        ),
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(fields=["actor_kind", "-at"], name="audit_kind_at"),
        ),
    ]

"""The audit log's model moves here from the dashboard, so the API and the admin (below the
dashboard in the import layers) can record into it. Only Django's idea of where the model lives
changes: the table `dashboard_auditentry`, its rows, indexes and append-only trigger (dashboard
migration 0001) stay exactly as they are, so nothing is copied and nothing is lost, on
PostgreSQL or SQLite."""

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("dashboard", "0001_initial"),  # the table exists (and has its trigger) before the model claims it
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("at", models.DateTimeField()),
                        ("actor_id", models.IntegerField(blank=True, null=True)),
                        ("actor", models.CharField(max_length=150)),
                        ("action", models.CharField(max_length=40)),
                        ("target_type", models.CharField(max_length=20)),
                        ("target_id", models.CharField(blank=True, max_length=64)),
                        ("target_label", models.CharField(blank=True, max_length=200)),
                        ("job_id", models.UUIDField(blank=True, null=True)),
                        ("tenant_id", models.IntegerField(blank=True, null=True)),
                        (
                            "outcome",
                            models.CharField(
                                choices=[
                                    ("OK", "Ok"),
                                    ("REFUSED", "Refused"),
                                    ("INVALID", "Invalid"),
                                    ("NOT_FOUND", "Not Found"),
                                    ("ERROR", "Error"),
                                ],
                                max_length=10,
                            ),
                        ),
                        ("detail", models.TextField(blank=True)),
                        ("source_ip", models.GenericIPAddressField(blank=True, null=True)),
                        ("request_id", models.UUIDField(default=uuid.uuid4)),
                    ],
                    options={
                        "db_table": "dashboard_auditentry",
                        "ordering": ["-at", "-id"],
                        "verbose_name_plural": "audit entries",
                        "indexes": [
                            models.Index(fields=["-at"], name="audit_at"),
                            models.Index(fields=["tenant_id", "-at"], name="audit_tenant_at"),
                            models.Index(fields=["job_id", "-at"], name="audit_job_at"),
                            models.Index(fields=["target_id", "-at"], name="audit_target_at"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]

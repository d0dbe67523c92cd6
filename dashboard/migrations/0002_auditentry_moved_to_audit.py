"""The audit log's model now lives in the `audit` app (its migration 0001 claims the same table):
the dashboard forgets it in Django's state only. The table and its rows are untouched."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_initial"),
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditEntry")],
            database_operations=[],
        ),
    ]

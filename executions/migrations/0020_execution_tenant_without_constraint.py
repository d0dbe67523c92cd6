"""An execution's tenant without a foreign-key constraint in the database (executions.models says
why): its check at each new row's commit was redundant with its job's. The column, and the
indexes that lead with it, stay. Reversed, the constraint is added again (and checks every row)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0019_state_indexes_at_rest"),
        ("tenants", "0004_signing_secret_rotation"),
    ]

    operations = [
        migrations.AlterField(
            model_name="execution",
            name="tenant",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="executions",
                to="tenants.tenant",
            ),
        ),
    ]

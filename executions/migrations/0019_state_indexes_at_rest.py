"""The state-ordered indexes without the rows in flight (QUEUED, RUNNING) on PostgreSQL:
execution_tenant_state, execution_state and execution_activity (executions.models.PartialOnPostgres
says why, and why SQLite's stay whole, as they are: nothing to do there).

On PostgreSQL each is built again beside the old one, CONCURRENTLY (a table of millions keeps
taking writes meanwhile, and its reads keep an index), then the old one dropped, CONCURRENTLY, and
the new one takes its name."""

from django.db import migrations, models

import executions.models

AT_REST = models.Q(("state__in", ("QUEUED", "RUNNING")), _negated=True)
INDEXES = (
    (["tenant", "state", "-scheduled_for"], "execution_tenant_state"),
    (["state", "-scheduled_for"], "execution_state"),
    (["state", "-updated_at"], "execution_activity"),
)


def _swap(apps, schema_editor, *, condition) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    model = apps.get_model("executions", "Execution")
    for fields, name in INDEXES:
        new = models.Index(fields=fields, condition=condition, name=f"{name}_new")
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}_new"')  # a build interrupted before
        schema_editor.execute(new.create_sql(model, schema_editor, concurrently=True))
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        schema_editor.execute(f'ALTER INDEX "{name}_new" RENAME TO "{name}"')


def at_rest(apps, schema_editor):
    _swap(apps, schema_editor, condition=AT_REST)


def whole(apps, schema_editor):
    _swap(apps, schema_editor, condition=None)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [("executions", "0018_job_fire_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(at_rest, whole, elidable=False)],
            state_operations=[
                *(migrations.RemoveIndex(model_name="execution", name=name) for _, name in INDEXES),
                *(
                    migrations.AddIndex(
                        model_name="execution",
                        index=executions.models.PartialOnPostgres(fields=fields, condition=AT_REST, name=name),
                    )
                    for fields, name in INDEXES
                ),
            ],
        ),
    ]

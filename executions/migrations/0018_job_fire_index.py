"""One unique index for a job's fires and its history: execution_job_fire, on (job, scheduled_for,
step, CASE WHEN origin = 'SCHEDULE' THEN true END), instead of the partial unique
execution_one_per_fire_step (the SCHEDULE rows) beside execution_job_history (every row): every
version of a row wrote an entry in both (executions/models.py says why the one index does both).

On PostgreSQL the new index is built, and the old ones dropped, CONCURRENTLY (as 0003 does): a
table of millions of executions keeps taking the dispatcher's and workers' writes meanwhile; the
new one is built first, so a fire is never without its uniqueness. SQLite has no concurrent build
and no concurrent writers to protect."""

from django.db import migrations, models


def _postgres(schema_editor) -> bool:
    return schema_editor.connection.vendor == "postgresql"


class AddConstraintConcurrentlyOnPostgres(migrations.AddConstraint):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        sql = str(self.constraint.create_sql(model, schema_editor))
        # A build interrupted before (a concurrent build that fails leaves its index, invalid) is
        # built again: the migration runs again as a whole, not applied.
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {self.constraint.name}")
        schema_editor.execute(sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX CONCURRENTLY", 1))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {self.constraint.name}")


class RemoveConstraintConcurrentlyOnPostgres(migrations.RemoveConstraint):
    """A partial unique constraint is an index on PostgreSQL: dropped as one, concurrently."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {self.name}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        constraint = to_state.models[app_label, self.model_name_lower].get_constraint_by_name(self.name)
        sql = str(constraint.create_sql(model, schema_editor))
        schema_editor.execute(sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX CONCURRENTLY", 1))


class RemoveIndexConcurrentlyOnPostgres(migrations.RemoveIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.remove_index(model, index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not _postgres(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.add_index(model, index, concurrently=True)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("executions", "0017_drop_lease_index_for_hot_heartbeats"),
    ]

    operations = [
        AddConstraintConcurrentlyOnPostgres(
            model_name="execution",
            constraint=models.UniqueConstraint(
                models.F("job"),
                models.F("scheduled_for"),
                models.F("step"),
                models.Case(
                    models.When(origin="SCHEDULE", then=models.Value(True)), output_field=models.BooleanField()
                ),
                name="execution_job_fire",
            ),
        ),
        RemoveConstraintConcurrentlyOnPostgres(model_name="execution", name="execution_one_per_fire_step"),
        RemoveIndexConcurrentlyOnPostgres(model_name="execution", name="execution_job_history"),
    ]

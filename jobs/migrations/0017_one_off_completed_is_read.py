from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0016_target_rate_limit'),
        ('tenants', '0004_signing_secret_rotation'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='job',
            name='job_state_valid',
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_ended',
        ),
        # A one-off's COMPLETED is read from its executions (executions/standing.py): the row
        # holds ACTIVE, with the next fire it was made with. Back: the one-offs that read
        # COMPLETED are written so again.
        migrations.RunSQL(
            "UPDATE jobs_job SET state = 'ACTIVE' WHERE state = 'COMPLETED'",
            reverse_sql=(
                "UPDATE jobs_job SET state = 'COMPLETED', next_fire_at = NULL WHERE state = 'ACTIVE'"
                " AND type IN ('ONCE', 'DELAYED') AND NOT EXISTS (SELECT 1 FROM executions_execution e"
                " WHERE e.job_id = jobs_job.id AND e.state NOT IN ('SUCCEEDED', 'CANCELLED', 'DEAD', 'DISCARDED'))"
            ),
        ),
        migrations.AlterField(
            model_name='job',
            name='state',
            field=models.CharField(choices=[('ACTIVE', 'Active'), ('PAUSED', 'Paused'), ('CANCELLED', 'Cancelled')], default='ACTIVE', max_length=10),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'CANCELLED'), ('type__in', ['ONCE', 'DELAYED']), _connector='OR'), fields=['updated_at'], name='job_ending'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('state__in', ['ACTIVE', 'PAUSED', 'CANCELLED'])), name='job_state_valid'),
        ),
    ]

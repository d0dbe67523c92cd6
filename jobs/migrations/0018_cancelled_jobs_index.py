from django.db import migrations, models


# Retention finds a one-off by its executions as they are pruned (scheduling.pruning.jobs_prune),
# in their transaction, so it no longer reads this index: a one-off need not enter it as it is
# made (an index entry and ~75 bytes of WAL per create). Only the cancelled are looked up by time.
class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0017_one_off_completed_is_read'),
        ('tenants', '0004_signing_secret_rotation'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='job',
            name='job_ending',
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'CANCELLED')), fields=['updated_at'], name='job_ended'),
        ),
    ]

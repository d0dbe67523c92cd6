from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0018_cancelled_jobs_index'),
        ('tenants', '0004_signing_secret_rotation'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='job',
            name='job_tenant_state',
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['tenant', 'state', 'type'], name='job_tenant_state'),
        ),
    ]

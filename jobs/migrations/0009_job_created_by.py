"""Who created a job, on its row: a job's version 1 is stored only once its definition first
changes (jobs.versions), and until then the row answers for it, author included. Jobs made before
this migration keep the version 1 they have; their empty `created_by` is never read."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0008_jobs_fillfactor")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="created_by",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
    ]

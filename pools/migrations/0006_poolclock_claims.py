from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0005_rate_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="poolclock",
            name="claims",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
    ]

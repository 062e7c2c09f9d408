"""The list's order (registered_at DESC, id) as one index carrying the branch, built without blocking
writes; it supersedes the single-column index on registered_at."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("patients", "0004_registration_count"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="patient",
            index=models.Index(
                fields=["-registered_at", "id"], include=("registration_branch",), name="patient_registered_order"
            ),
        ),
        migrations.AlterField(
            model_name="patient",
            name="registered_at",
            field=models.DateTimeField(auto_now_add=True),
        ),
    ]

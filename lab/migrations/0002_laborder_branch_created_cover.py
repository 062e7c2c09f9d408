"""The (branch, created_at) index of lab orders also carries status and priority (index-only counts of a
branch's filtered list). Built concurrently, so the release before keeps serving while it runs."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("lab", "0001_initial")]

    operations = [
        AddIndexConcurrently(
            model_name="laborder",
            index=models.Index(
                fields=["branch", "-created_at"], include=["status", "priority"], name="laborder_branch_created_cover"
            ),
        ),
        RemoveIndexConcurrently(model_name="laborder", name="laborder_branch_created"),
    ]

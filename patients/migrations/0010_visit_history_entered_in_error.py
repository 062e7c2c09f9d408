"""The profile's and the list's visit reads leave out visits entered in error: the covering index that
serves them carries the marker, so they stay index-only. Built and dropped concurrently (no lock that
blocks the running release's writes), hence outside a transaction."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("patients", "0009_records_never_deleted")]

    operations = [
        AddIndexConcurrently(
            model_name="visit",
            index=models.Index(
                fields=["patient", "-start", "id"],
                include=("type", "end", "doctor", "department", "branch", "reason", "entered_in_error"),
                name="visit_patient_history",
            ),
        ),
        RemoveIndexConcurrently(model_name="visit", name="visit_history"),
    ]

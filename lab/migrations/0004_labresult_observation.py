"""A covering partial index for FHIR Observation?patient=: each order item's current analyte results with
their performed_at and id, so counting and paging a patient's Observations reads no table rows. Built without
blocking writes (a release migrates while the previous one serves)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("lab", "0003_imaging_worklist")]

    operations = [
        AddIndexConcurrently(
            model_name="labresult",
            index=models.Index(
                fields=["item"],
                include=["performed_at", "id"],
                condition=Q(current=True, analyte__isnull=False),
                name="labresult_observation",
            ),
        ),
    ]

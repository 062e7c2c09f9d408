"""The (search_name, registered_at) index carries the id and the branch: a page of patients by name takes its
ids from the index alone (FHIR Patient?name=, patients.search). Built before the old one is dropped, neither
blocking writes (a release migrates while the previous one serves)."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("patients", "0012_fhir_search_indexes")]

    operations = [
        AddIndexConcurrently(
            model_name="patient",
            index=models.Index(
                fields=["search_name", "-registered_at"],
                include=["id", "registration_branch"],
                name="patient_name_page",
            ),
        ),
        RemoveIndexConcurrently(model_name="patient", name="patient_name_registered"),
    ]

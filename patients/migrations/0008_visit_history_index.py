"""A patient's visit history as one covering index (patient, start DESC, id) INCLUDE the columns the
profile shows, built without blocking writes. A long history's visits lie on one heap page each (they
were inserted over years among everyone else's); the profile now reads them from a few index pages. The
index supersedes visit_patient_start and the foreign key's own index on patient."""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("patients", "0007_drop_name_trigram_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="visit",
            index=models.Index(
                fields=["patient", "-start", "id"],
                include=("type", "end", "doctor", "department", "branch", "reason"),
                name="visit_history",
            ),
        ),
        RemoveIndexConcurrently(model_name="visit", name="visit_patient_start"),
        migrations.AlterField(
            model_name="visit",
            name="patient",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="visits",
                to="patients.patient",
            ),
        ),
    ]

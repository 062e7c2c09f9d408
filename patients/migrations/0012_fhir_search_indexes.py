"""Indexes for FHIR search (integrations.fhir): Patient?birthdate= with its prefixes, and Encounter?date=
across patients in its default order. Built without blocking writes (a release migrates while the previous
one serves)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("clinic", "0005_branch_state_known"),
        ("patients", "0011_address_state_choices"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="patient",
            index=models.Index(fields=["date_of_birth"], name="patient_birth_date"),
        ),
        AddIndexConcurrently(
            model_name="visit",
            index=models.Index(fields=["-start", "id"], name="visit_start_order"),
        ),
    ]

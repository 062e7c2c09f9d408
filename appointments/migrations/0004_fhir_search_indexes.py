"""An index for FHIR Appointment?date= across doctors and patients, in its default order (slot_start, id).
Built without blocking writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("appointments", "0003_records_never_deleted"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="appointment",
            index=models.Index(fields=["slot_start", "id"], name="appointment_start_order"),
        ),
    ]

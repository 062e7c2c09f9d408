"""Appointments and their history are never deleted (docs/api-rules.md §7): PROTECT instead of CASCADE and
SET_NULL, and a trigger that refuses DELETE even from raw SQL. No column changes: safe while the previous
release serves (it cancels appointments, it never deletes them)."""

import django.db.models.deletion
from django.db import migrations, models

from clinic.records import refuse_delete_sql


class Migration(migrations.Migration):
    dependencies = [
        ("appointments", "0002_lifecycle"),
        ("clinic", "0003_record_change"),
        ("patients", "0009_records_never_deleted"),
    ]

    operations = [
        migrations.AlterField(
            model_name="appointment",
            name="visit",
            field=models.OneToOneField(
                blank=True,
                help_text="The outpatient visit added to the patient's history when the appointment was completed.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="appointment",
                to="patients.visit",
            ),
        ),
        migrations.AlterField(
            model_name="appointmentchange",
            name="appointment",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="changes", to="appointments.appointment"
            ),
        ),
        migrations.RunSQL(*refuse_delete_sql("appointments_appointment", "appointment")),
        migrations.RunSQL(*refuse_delete_sql("appointments_appointmentchange", "appointment change")),
    ]

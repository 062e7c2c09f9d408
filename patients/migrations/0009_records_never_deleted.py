"""Patients and their clinical records are never deleted (docs/api-rules.md §7): PROTECT instead of
CASCADE, a trigger that refuses DELETE even from raw SQL (insurance policies are demographics, replaced
when a PATCH sends a new list, so they have none), the entered-in-error marker, and the merge pointer.

Safe while the previous release serves: the new columns have database defaults (its INSERTs leave them
out), the CHECK constraints hold for every existing row, and that release deletes none of these rows.
The visit index that carries entered_in_error is built concurrently in 0010."""

import django.db.models.deletion
from django.db import migrations, models

from clinic.records import refuse_delete_sql

NEVER_DELETED = [
    ("patients_patient", "patient"),
    ("patients_visit", "visit"),
    ("patients_diagnosis", "diagnosis"),
    ("patients_allergy", "allergy"),
    ("patients_medication", "medication"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("clinic", "0003_record_change"),
        ("patients", "0008_visit_history_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="allergy",
            name="entered_in_error",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="allergy",
            name="entered_in_error_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="allergy",
            name="entered_in_error_by",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, help_text='"staff:<username>"', max_length=200
            ),
        ),
        migrations.AddField(
            model_name="allergy",
            name="entered_in_error_reason",
            field=models.CharField(blank=True, db_default="", default="", editable=False, max_length=500),
        ),
        migrations.AddField(
            model_name="diagnosis",
            name="entered_in_error",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="diagnosis",
            name="entered_in_error_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="diagnosis",
            name="entered_in_error_by",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, help_text='"staff:<username>"', max_length=200
            ),
        ),
        migrations.AddField(
            model_name="diagnosis",
            name="entered_in_error_reason",
            field=models.CharField(blank=True, db_default="", default="", editable=False, max_length=500),
        ),
        migrations.AddField(
            model_name="medication",
            name="entered_in_error",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="medication",
            name="entered_in_error_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="medication",
            name="entered_in_error_by",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, help_text='"staff:<username>"', max_length=200
            ),
        ),
        migrations.AddField(
            model_name="medication",
            name="entered_in_error_reason",
            field=models.CharField(blank=True, db_default="", default="", editable=False, max_length=500),
        ),
        migrations.AddField(
            model_name="patient",
            name="merged_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="patient",
            name="merged_into",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="merged_patients",
                to="patients.patient",
            ),
        ),
        migrations.AddField(
            model_name="visit",
            name="entered_in_error",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="visit",
            name="entered_in_error_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="visit",
            name="entered_in_error_by",
            field=models.CharField(
                blank=True, db_default="", default="", editable=False, help_text='"staff:<username>"', max_length=200
            ),
        ),
        migrations.AddField(
            model_name="visit",
            name="entered_in_error_reason",
            field=models.CharField(blank=True, db_default="", default="", editable=False, max_length=500),
        ),
        migrations.AlterField(
            model_name="allergy",
            name="patient",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="allergies", to="patients.patient"
            ),
        ),
        migrations.AlterField(
            model_name="diagnosis",
            name="patient",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="diagnoses", to="patients.patient"
            ),
        ),
        migrations.AlterField(
            model_name="insurance",
            name="patient",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="insurance", to="patients.patient"
            ),
        ),
        migrations.AlterField(
            model_name="medication",
            name="patient",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="medications", to="patients.patient"
            ),
        ),
        migrations.AlterField(
            model_name="visit",
            name="patient",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="visits",
                to="patients.patient",
            ),
        ),
        migrations.AddConstraint(
            model_name="allergy",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("entered_in_error", False),
                        ("entered_in_error_at__isnull", True),
                        ("entered_in_error_by", ""),
                        ("entered_in_error_reason", ""),
                    ),
                    models.Q(
                        ("entered_in_error", True),
                        ("entered_in_error_at__isnull", False),
                        ("entered_in_error_by__regex", "\\S"),
                        ("entered_in_error_reason__regex", "\\S"),
                    ),
                    _connector="OR",
                ),
                name="allergy_entered_in_error_complete",
            ),
        ),
        migrations.AddConstraint(
            model_name="diagnosis",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("entered_in_error", False),
                        ("entered_in_error_at__isnull", True),
                        ("entered_in_error_by", ""),
                        ("entered_in_error_reason", ""),
                    ),
                    models.Q(
                        ("entered_in_error", True),
                        ("entered_in_error_at__isnull", False),
                        ("entered_in_error_by__regex", "\\S"),
                        ("entered_in_error_reason__regex", "\\S"),
                    ),
                    _connector="OR",
                ),
                name="diagnosis_entered_in_error_complete",
            ),
        ),
        migrations.AddConstraint(
            model_name="medication",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("entered_in_error", False),
                        ("entered_in_error_at__isnull", True),
                        ("entered_in_error_by", ""),
                        ("entered_in_error_reason", ""),
                    ),
                    models.Q(
                        ("entered_in_error", True),
                        ("entered_in_error_at__isnull", False),
                        ("entered_in_error_by__regex", "\\S"),
                        ("entered_in_error_reason__regex", "\\S"),
                    ),
                    _connector="OR",
                ),
                name="medication_entered_in_error_complete",
            ),
        ),
        migrations.AddConstraint(
            model_name="patient",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("merged_at__isnull", True), ("merged_into__isnull", True)),
                    models.Q(
                        ("is_active", False),
                        ("merged_at__isnull", False),
                        ("merged_into__isnull", False),
                        models.Q(("merged_into", models.F("id")), _negated=True),
                    ),
                    _connector="OR",
                ),
                name="patient_merge_consistent",
            ),
        ),
        migrations.AddConstraint(
            model_name="visit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("entered_in_error", False),
                        ("entered_in_error_at__isnull", True),
                        ("entered_in_error_by", ""),
                        ("entered_in_error_reason", ""),
                    ),
                    models.Q(
                        ("entered_in_error", True),
                        ("entered_in_error_at__isnull", False),
                        ("entered_in_error_by__regex", "\\S"),
                        ("entered_in_error_reason__regex", "\\S"),
                    ),
                    _connector="OR",
                ),
                name="visit_entered_in_error_complete",
            ),
        ),
        *(migrations.RunSQL(*refuse_delete_sql(table, noun)) for table, noun in NEVER_DELETED),
    ]

"""Records are never deleted (docs/api-rules.md §7): the history of admin changes (RecordChange, itself
insert-only), and clinic_refuse_delete(), the trigger function each app's record tables use (see
clinic.records.refuse_delete_sql). A new table and a new function: nothing the running release uses."""

import django.db.models.deletion
from django.db import migrations, models

from clinic.records import DROP_REFUSE_DELETE_FUNCTION, REFUSE_DELETE_FUNCTION

HISTORY_IMMUTABLE = """
CREATE FUNCTION clinic_recordchange_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'records are never deleted: % of record change % refused', TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation', HINT = 'The history of records is insert-only.';
END;
$$;
CREATE TRIGGER clinic_recordchange_immutable
    BEFORE UPDATE OR DELETE ON clinic_recordchange
    FOR EACH ROW EXECUTE FUNCTION clinic_recordchange_immutable();
"""
DROP_HISTORY_IMMUTABLE = """
DROP TRIGGER IF EXISTS clinic_recordchange_immutable ON clinic_recordchange;
DROP FUNCTION IF EXISTS clinic_recordchange_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("clinic", "0002_branch_head_office"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="RecordChange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("object_id", models.CharField(max_length=64)),
                ("patient_id", models.UUIDField(blank=True, null=True)),
                ("at", models.DateTimeField()),
                ("actor", models.CharField(help_text='"staff:<username>" or "system".', max_length=200)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("added", "Added"),
                            ("changed", "Changed"),
                            ("entered_in_error", "Entered In Error"),
                            ("deactivated", "Deactivated"),
                            ("merged", "Merged"),
                        ],
                        max_length=20,
                    ),
                ),
                ("changes", models.JSONField(blank=True, default=dict, help_text='{"field": [old, new]}')),
                ("reason", models.CharField(blank=True, max_length=500)),
                (
                    "content_type",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="contenttypes.contenttype"
                    ),
                ),
            ],
            options={
                "ordering": ["-at", "-id"],
                "indexes": [
                    models.Index(fields=["content_type", "object_id", "-at"], name="record_change_object"),
                    models.Index(fields=["patient_id", "-at"], name="record_change_patient"),
                ],
            },
        ),
        migrations.RunSQL(HISTORY_IMMUTABLE, DROP_HISTORY_IMMUTABLE),
        migrations.RunSQL(REFUSE_DELETE_FUNCTION, DROP_REFUSE_DELETE_FUNCTION),
    ]

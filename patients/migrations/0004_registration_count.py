"""Registrations per branch per UTC day (RegistrationCount), kept by statement-level triggers on
patients_patient and backfilled here. The patient list reads its X-Total-Count and finds the day that
holds a deep page's first row from these counts (patients.selectors.patient_list).

Statement-level triggers with transition tables: a COPY of a million patients runs the trigger once and
upserts each (day, branch) row once, instead of a million row-level upserts queueing on the same hot row.
An UPDATE counts only the patients it moved to another branch or day, so ordinary edits write nothing.
The (day, branch) rows are upserted in key order, so concurrent bulk writers cannot deadlock on them."""

import django.db.models.deletion
from django.db import migrations, models

COUNT_REGISTRATIONS = """
CREATE FUNCTION patients_count_registrations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Only the statement's own transition tables exist, so each event reads its own (plpgsql plans a
  -- statement when it first runs it).
  IF TG_OP = 'INSERT' THEN
    INSERT INTO patients_registrationcount AS c (day, branch_id, registered)
    SELECT (registered_at AT TIME ZONE 'UTC')::date, registration_branch_id, count(*)
    FROM new_patients GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (day, branch_id) DO UPDATE SET registered = c.registered + excluded.registered;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO patients_registrationcount AS c (day, branch_id, registered)
    SELECT (registered_at AT TIME ZONE 'UTC')::date, registration_branch_id, -count(*)
    FROM old_patients GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (day, branch_id) DO UPDATE SET registered = c.registered + excluded.registered;
  ELSE
    INSERT INTO patients_registrationcount AS c (day, branch_id, registered)
    SELECT day, branch_id, sum(change) FROM (
      SELECT (registered_at AT TIME ZONE 'UTC')::date AS day, registration_branch_id AS branch_id, 1 AS change
      FROM new_patients
      UNION ALL
      SELECT (registered_at AT TIME ZONE 'UTC')::date, registration_branch_id, -1 FROM old_patients
    ) changes
    GROUP BY 1, 2 HAVING sum(change) <> 0 ORDER BY 1, 2
    ON CONFLICT (day, branch_id) DO UPDATE SET registered = c.registered + excluded.registered;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION patients_forget_registrations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM patients_registrationcount;
  RETURN NULL;
END $$;

-- Blocks writers until this migration commits, so BACKFILL (run next, in the same transaction) misses
-- nothing and counts nothing twice.
LOCK TABLE patients_patient IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER patients_count_inserted AFTER INSERT ON patients_patient
REFERENCING NEW TABLE AS new_patients FOR EACH STATEMENT EXECUTE FUNCTION patients_count_registrations();
CREATE TRIGGER patients_count_deleted AFTER DELETE ON patients_patient
REFERENCING OLD TABLE AS old_patients FOR EACH STATEMENT EXECUTE FUNCTION patients_count_registrations();
CREATE TRIGGER patients_count_updated AFTER UPDATE ON patients_patient
REFERENCING OLD TABLE AS old_patients NEW TABLE AS new_patients
FOR EACH STATEMENT EXECUTE FUNCTION patients_count_registrations();
CREATE TRIGGER patients_count_truncated AFTER TRUNCATE ON patients_patient
FOR EACH STATEMENT EXECUTE FUNCTION patients_forget_registrations();
"""

BACKFILL = """
INSERT INTO patients_registrationcount (day, branch_id, registered)
SELECT (registered_at AT TIME ZONE 'UTC')::date, registration_branch_id, count(*)
FROM patients_patient GROUP BY 1, 2;
"""

DROP_COUNT_REGISTRATIONS = """
DROP TRIGGER patients_count_inserted ON patients_patient;
DROP TRIGGER patients_count_deleted ON patients_patient;
DROP TRIGGER patients_count_updated ON patients_patient;
DROP TRIGGER patients_count_truncated ON patients_patient;
DROP FUNCTION patients_count_registrations();
DROP FUNCTION patients_forget_registrations();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("clinic", "0001_initial"),
        ("patients", "0003_name_trigger_skips_known_names"),
    ]

    operations = [
        migrations.CreateModel(
            name="RegistrationCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "day", "branch", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("day", models.DateField()),
                (
                    "branch",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="clinic.branch"
                    ),
                ),
                ("registered", models.IntegerField()),
            ],
        ),
        migrations.RunSQL(COUNT_REGISTRATIONS + BACKFILL, DROP_COUNT_REGISTRATIONS),
    ]

"""The name-dictionary trigger looks the name up before computing its letter key: most inserted
patients carry a name the dictionary already holds (common names repeat a lot), and computing
patients_letter_key() for each of them made bulk registration about twice as slow."""

from django.db import migrations

RECORD_NAME_CHECKING_FIRST = """
CREATE OR REPLACE FUNCTION patients_record_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM patients_patientname WHERE name = NEW.search_name) THEN
    INSERT INTO patients_patientname (name, letter_key)
    VALUES (NEW.search_name, patients_letter_key(NEW.search_name))
    ON CONFLICT (name) DO NOTHING;
  END IF;
  RETURN NULL;
END $$;
"""

RECORD_NAME_ALWAYS = """
CREATE OR REPLACE FUNCTION patients_record_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO patients_patientname (name, letter_key)
  VALUES (NEW.search_name, patients_letter_key(NEW.search_name))
  ON CONFLICT (name) DO NOTHING;
  RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("patients", "0002_patient_name_dictionary")]

    operations = [migrations.RunSQL(RECORD_NAME_CHECKING_FIRST, RECORD_NAME_ALWAYS)]

"""Word-level name search (patients.search): the distinct words of patient names, and which names hold
each word. The fuzzy match then runs over the few thousand distinct words instead of every distinct full
name (244,000 at 1,000,000 realistic patients, where a trigram scan of the names took 150-300 ms), and
the names come from an index-only scan of (word, name).

Both tables are internal to the search, kept by a trigger on the name dictionary (which a trigger on
patients keeps), so every writer of patients keeps them complete; names are never removed, as from the
dictionary itself.
"""

from django.db import migrations

CREATE = r"""
CREATE TABLE patients_nameword (
  word text PRIMARY KEY,
  letter_key text NOT NULL
);
CREATE INDEX patients_nameword_trgm ON patients_nameword USING gin (word gin_trgm_ops);
CREATE INDEX patients_nameword_letters_trgm ON patients_nameword USING gin (letter_key gin_trgm_ops);
CREATE TABLE patients_namepart (
  word text NOT NULL,
  name varchar(201) NOT NULL,
  PRIMARY KEY (word, name)
);

CREATE FUNCTION patients_record_name_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO patients_nameword (word, letter_key)
  SELECT DISTINCT w, patients_letter_key(w) FROM regexp_split_to_table(btrim(NEW.name), '\s+') AS w
  WHERE w <> '' AND NOT EXISTS (SELECT 1 FROM patients_nameword d WHERE d.word = w)
  ON CONFLICT (word) DO NOTHING;
  INSERT INTO patients_namepart (word, name)
  SELECT DISTINCT w, NEW.name FROM regexp_split_to_table(btrim(NEW.name), '\s+') AS w WHERE w <> ''
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER patients_record_name_words AFTER INSERT ON patients_patientname
FOR EACH ROW EXECUTE FUNCTION patients_record_name_words();

-- No foreign key to the dictionary: Django's flush (tests) truncates the tables it has models for, and a
-- key from this model-less table would refuse that. Emptying the dictionary empties the words instead.
CREATE FUNCTION patients_forget_name_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE patients_namepart, patients_nameword;
  RETURN NULL;
END $$;
CREATE TRIGGER patients_forget_name_words AFTER TRUNCATE ON patients_patientname
FOR EACH STATEMENT EXECUTE FUNCTION patients_forget_name_words();

INSERT INTO patients_nameword (word, letter_key)
SELECT DISTINCT w, patients_letter_key(w) FROM patients_patientname, regexp_split_to_table(btrim(name), '\s+') AS w
WHERE w <> '';
INSERT INTO patients_namepart (word, name)
SELECT DISTINCT w, name FROM patients_patientname, regexp_split_to_table(btrim(name), '\s+') AS w WHERE w <> '';
ANALYZE patients_nameword;
ANALYZE patients_namepart;
"""

DROP = """
DROP TRIGGER IF EXISTS patients_forget_name_words ON patients_patientname;
DROP FUNCTION IF EXISTS patients_forget_name_words();
DROP TRIGGER IF EXISTS patients_record_name_words ON patients_patientname;
DROP FUNCTION IF EXISTS patients_record_name_words();
DROP TABLE IF EXISTS patients_namepart;
DROP TABLE IF EXISTS patients_nameword;
"""


class Migration(migrations.Migration):
    dependencies = [("patients", "0005_patient_registered_order")]

    operations = [migrations.RunSQL(CREATE, DROP)]

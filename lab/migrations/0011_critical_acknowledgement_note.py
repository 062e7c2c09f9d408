"""A note with the acknowledgement of a critical result: who was told and how ("Dr Rao by phone, read back").
One column with a constant default (no table rewrite at 10M results), and the versions trigger of lab 0007
taught that the note is set with the acknowledgement, in the same UPDATE, and never after."""

import importlib
from django.db import migrations, models

PREVIOUS = importlib.import_module("lab.migrations.0007_critical_acknowledgement")

NOTE_WITH_THE_ACKNOWLEDGEMENT = """
CREATE OR REPLACE FUNCTION lab_labresult_keep_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.current AND NOT NEW.current
       AND (to_jsonb(NEW) - 'current') = (to_jsonb(OLD) - 'current') THEN
        RETURN NEW;
    END IF;
    IF OLD.critical_acknowledged_at IS NULL AND NEW.critical_acknowledged_at IS NOT NULL
       AND (to_jsonb(NEW) - 'critical_acknowledged_at' - 'critical_acknowledged_by' - 'critical_acknowledgement_note')
           = (to_jsonb(OLD) - 'critical_acknowledged_at' - 'critical_acknowledged_by' - 'critical_acknowledgement_note') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'lab result versions are kept: UPDATE of result % refused', OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Post a new version (status amended, with a reason) instead.';
END;
$$;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('lab', '0010_acknowledge_verified_history'),
    ]

    operations = [
        migrations.AddField(
            model_name='labresult',
            name='critical_acknowledgement_note',
            field=models.CharField(blank=True, db_default='', default='', max_length=500),
        ),
        migrations.RunSQL(NOTE_WITH_THE_ACKNOWLEDGEMENT, PREVIOUS.ACKNOWLEDGEMENT_ALLOWED),
    ]

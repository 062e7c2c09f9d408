"""Who acknowledged a critical result and when (lab.review): two columns on the result versions, and the
versions trigger of lab 0001 taught the one change it now allows besides superseding: setting the
acknowledgement of a critical version that has none. Every other UPDATE is still refused."""

from django.db import migrations, models

ACKNOWLEDGEMENT_ALLOWED = """
CREATE OR REPLACE FUNCTION lab_labresult_keep_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.current AND NOT NEW.current
       AND (to_jsonb(NEW) - 'current') = (to_jsonb(OLD) - 'current') THEN
        RETURN NEW;
    END IF;
    IF OLD.critical_acknowledged_at IS NULL AND NEW.critical_acknowledged_at IS NOT NULL
       AND (to_jsonb(NEW) - 'critical_acknowledged_at' - 'critical_acknowledged_by')
           = (to_jsonb(OLD) - 'critical_acknowledged_at' - 'critical_acknowledged_by') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'lab result versions are kept: UPDATE of result % refused', OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Post a new version (status amended, with a reason) instead.';
END;
$$;
"""
VERSIONS_ONLY = """
CREATE OR REPLACE FUNCTION lab_labresult_keep_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.current AND NOT NEW.current
       AND (to_jsonb(NEW) - 'current') = (to_jsonb(OLD) - 'current') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'lab result versions are kept: UPDATE of result % refused', OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Post a new version (status amended, with a reason) instead.';
END;
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("lab", "0006_imaging_station_plural")]

    operations = [
        migrations.AddField(
            model_name="labresult",
            name="critical_acknowledged_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="labresult",
            name="critical_acknowledged_by",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddConstraint(
            model_name="labresult",
            constraint=models.CheckConstraint(
                condition=models.Q(critical_acknowledged_at__isnull=True, critical_acknowledged_by="")
                | (
                    models.Q(critical_acknowledged_at__isnull=False, flag__in=("LL", "HH"))
                    & ~models.Q(critical_acknowledged_by="")
                ),
                name="labresult_acknowledged_only_critical",
            ),
        ),
        migrations.RunSQL(ACKNOWLEDGEMENT_ALLOWED, VERSIONS_ONLY),
    ]

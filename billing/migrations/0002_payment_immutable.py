"""Payments are never updated or deleted (docs/api-rules.md §11): a trigger refuses both, so not even raw SQL,
the admin or a future bug can rewrite money already received. TRUNCATE (test teardown) is not affected."""

from django.db import migrations

CREATE = """
CREATE FUNCTION billing_payment_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'billing payments are immutable: % of payment % refused', TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Record a new payment instead; payments are never updated or deleted.';
END;
$$;
CREATE TRIGGER billing_payment_immutable
    BEFORE UPDATE OR DELETE ON billing_payment
    FOR EACH ROW EXECUTE FUNCTION billing_payment_immutable();
"""

DROP = """
DROP TRIGGER IF EXISTS billing_payment_immutable ON billing_payment;
DROP FUNCTION IF EXISTS billing_payment_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]

    operations = [migrations.RunSQL(CREATE, DROP)]

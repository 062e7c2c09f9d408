"""Branch, invoice date and "billed" copied onto line items, and the branch onto payments, so the financial
summary reads each of its three figures from one covering index, without joining lines or payments to
their invoices. Triggers keep the copies right whatever writes the rows (services, admin, bulk loads, SQL):

- a line takes its invoice's branch, date and billed flag on insert and on every update;
- a change of an invoice's date or status is copied to its lines; its branch never changes;
- a payment takes its invoice's branch on insert (payments are never updated, see 0002).
"""

import django.db.models.deletion
from django.db import migrations, models

BILLED = "('finalized', 'partially_paid', 'paid')"

BACKFILL = f"""
UPDATE billing_lineitem l
   SET branch_id = i.branch_id, invoice_date = i.date, billed = i.status IN {BILLED}
  FROM billing_invoice i WHERE i.id = l.invoice_id;
ALTER TABLE billing_payment DISABLE TRIGGER billing_payment_immutable;
UPDATE billing_payment p SET branch_id = i.branch_id FROM billing_invoice i WHERE i.id = p.invoice_id;
ALTER TABLE billing_payment ENABLE TRIGGER billing_payment_immutable;
"""

TRIGGERS = f"""
CREATE FUNCTION billing_lineitem_copy_invoice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT i.branch_id, i.date, i.status IN {BILLED}
      INTO NEW.branch_id, NEW.invoice_date, NEW.billed
      FROM billing_invoice i WHERE i.id = NEW.invoice_id;
    RETURN NEW;
END;
$$;
CREATE TRIGGER billing_lineitem_copy_invoice
    BEFORE INSERT OR UPDATE ON billing_lineitem
    FOR EACH ROW EXECUTE FUNCTION billing_lineitem_copy_invoice();

CREATE FUNCTION billing_invoice_copy_to_lines() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.branch_id IS DISTINCT FROM OLD.branch_id THEN
        RAISE EXCEPTION 'the branch of invoice % never changes', OLD.id USING ERRCODE = 'restrict_violation';
    END IF;
    UPDATE billing_lineitem
       SET branch_id = NEW.branch_id, invoice_date = NEW.date, billed = NEW.status IN {BILLED}
     WHERE invoice_id = NEW.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER billing_invoice_copy_to_lines
    AFTER UPDATE OF branch_id, date, status ON billing_invoice
    FOR EACH ROW
    WHEN (OLD.branch_id IS DISTINCT FROM NEW.branch_id OR OLD.date IS DISTINCT FROM NEW.date
          OR (OLD.status IN {BILLED}) IS DISTINCT FROM (NEW.status IN {BILLED}))
    EXECUTE FUNCTION billing_invoice_copy_to_lines();

CREATE FUNCTION billing_payment_copy_branch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT i.branch_id INTO NEW.branch_id FROM billing_invoice i WHERE i.id = NEW.invoice_id;
    RETURN NEW;
END;
$$;
CREATE TRIGGER billing_payment_copy_branch
    BEFORE INSERT ON billing_payment
    FOR EACH ROW EXECUTE FUNCTION billing_payment_copy_branch();
"""

DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS billing_payment_copy_branch ON billing_payment;
DROP FUNCTION IF EXISTS billing_payment_copy_branch();
DROP TRIGGER IF EXISTS billing_invoice_copy_to_lines ON billing_invoice;
DROP FUNCTION IF EXISTS billing_invoice_copy_to_lines();
DROP TRIGGER IF EXISTS billing_lineitem_copy_invoice ON billing_lineitem;
DROP FUNCTION IF EXISTS billing_lineitem_copy_invoice();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0002_payment_immutable"),
        ("clinic", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="lineitem",
            name="branch",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.AddField(
            model_name="lineitem",
            name="invoice_date",
            field=models.DateField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="lineitem",
            name="billed",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.AddField(
            model_name="payment",
            name="branch",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="lineitem",
            name="branch",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.AlterField(
            model_name="lineitem",
            name="invoice_date",
            field=models.DateField(editable=False),
        ),
        migrations.AlterField(
            model_name="payment",
            name="branch",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.RemoveIndex(model_name="lineitem", name="lineitem_invoice_department"),
        migrations.RemoveIndex(model_name="payment", name="payment_date_invoice"),
        migrations.AddIndex(
            model_name="lineitem",
            index=models.Index(
                condition=models.Q(("billed", True)),
                fields=["branch", "invoice_date"],
                include=("department", "taxable_amount"),
                name="lineitem_billed_branch_date",
            ),
        ),
        migrations.AddIndex(
            model_name="lineitem",
            index=models.Index(
                condition=models.Q(("billed", True)),
                fields=["invoice_date"],
                include=("department", "taxable_amount"),
                name="lineitem_billed_date",
            ),
        ),
        migrations.AddIndex(
            model_name="payment",
            index=models.Index(
                fields=["branch", "payment_date"], include=("amount", "payment_mode"), name="payment_branch_date"
            ),
        ),
        migrations.AddIndex(
            model_name="payment",
            index=models.Index(fields=["payment_date"], include=("amount", "payment_mode"), name="payment_date"),
        ),
        migrations.RunSQL(TRIGGERS, DROP_TRIGGERS),
    ]

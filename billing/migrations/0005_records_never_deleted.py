"""Invoices and their lines are never deleted (docs/api-rules.md §7; payments already refuse it, 0002).
The lines of a draft are the exception: a draft is not yet a record of account (no number, nothing
billed), and editing it replaces or removes lines (billing.services.invoice_update, line_item_remove).
Once finalized or cancelled its lines are kept for good. No column changes: safe while the previous
release serves (it only removes lines of drafts)."""

import django.db.models.deletion
from django.db import migrations, models

from clinic.records import refuse_delete_sql

DRAFT_LINES_ONLY = """
CREATE FUNCTION billing_lineitem_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM billing_invoice WHERE id = OLD.invoice_id) = 'draft' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'records are never deleted: DELETE of line item % of a non-draft invoice refused', OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Only the lines of a draft invoice can be removed; issue a credit note instead.';
END;
$$;
CREATE TRIGGER billing_lineitem_never_deleted BEFORE DELETE ON billing_lineitem
    FOR EACH ROW EXECUTE FUNCTION billing_lineitem_refuse_delete();
"""
DROP_DRAFT_LINES_ONLY = """
DROP TRIGGER IF EXISTS billing_lineitem_never_deleted ON billing_lineitem;
DROP FUNCTION IF EXISTS billing_lineitem_refuse_delete();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0004_summary_rollups"),
        ("clinic", "0003_record_change"),
    ]

    operations = [
        migrations.AlterField(
            model_name="lineitem",
            name="invoice",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="line_items", to="billing.invoice"
            ),
        ),
        migrations.RunSQL(*refuse_delete_sql("billing_invoice", "invoice")),
        migrations.RunSQL(DRAFT_LINES_ONLY, DROP_DRAFT_LINES_ONLY),
    ]

"""The day's collections by department (billing.models.CollectionRollup): every payment and refund spread
over its invoice's departments in proportion to the line amounts, summed per day, branch and department.

Kept as the rollups of 0004 are: statement-level AFTER triggers with transition tables on the inserts of
payments and refunds (and on UPDATE and DELETE, which 0002 and 0006 refuse, should a migration ever lift
that), in key order so that concurrent writers lock rows in one order; TRUNCATE of a source empties its
flow. A share is computed from the invoice as it stands when the money is recorded, so this migration also
refuses what would make it stale: a change to the amount, department or invoice of a line, or to the grand
total, of an invoice that is no longer a draft (services change only drafts' lines and totals, and money is
only recorded against finalized invoices).

The triggers come before the backfill: CREATE TRIGGER locks payments and refunds against writes until this
migration commits, so the backfill sees every committed row and none slips in between. At 1M invoices
(1.27M payments, 2.58M lines) this migration and lab 0011 together took 21 s, 197,760 rollup rows; a
payment's insert then spends 1-6 ms in the new trigger, beside the payment rollup's.
"""

import django.db.models.deletion
from decimal import Decimal
from django.db import migrations, models


# (flow, source table, its date column)
FLOWS = [("received", "billing_payment", "payment_date"), ("refunded", "billing_refund", "refund_date")]
KEY = "day, branch_id, flow, department_id"


def shares(flow: str, source: str, day: str, sign: str = "") -> str:
    """Each money row of `source` spread over its invoice's lines: (day, branch, flow, department, share)."""
    return f"""SELECT m.{day}, m.branch_id, '{flow}', l.department_id, {sign}(m.amount * l.amount / i.grand_total)
  FROM {source} m JOIN billing_invoice i ON i.id = m.invoice_id JOIN billing_lineitem l ON l.invoice_id = m.invoice_id
 WHERE i.grand_total > 0"""


def add(selects: list[str]) -> str:
    return f"""
        INSERT INTO billing_collectionrollup AS kept ({KEY}, amount)
        SELECT {KEY}, sum(amount) FROM ({" UNION ALL ".join(selects)}) AS share ({KEY}, amount)
         GROUP BY {KEY} ORDER BY {KEY}
            ON CONFLICT ({KEY}) DO UPDATE SET amount = kept.amount + excluded.amount;"""


def create_triggers(flow: str, source: str, day: str) -> str:
    name = f"billing_keep_collections_{flow}"
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN{add([shares(flow, "new_rows", day)])}
    ELSIF TG_OP = 'UPDATE' THEN{add([shares(flow, "new_rows", day), shares(flow, "old_rows", day, "-")])}
    ELSIF TG_OP = 'DELETE' THEN{add([shares(flow, "old_rows", day, "-")])}
    ELSE
        DELETE FROM billing_collectionrollup WHERE flow = '{flow}';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER {name}_insert AFTER INSERT ON {source}
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_update AFTER UPDATE ON {source}
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_delete AFTER DELETE ON {source}
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_truncate AFTER TRUNCATE ON {source} FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""


def drop_triggers(flow: str, source: str, day: str) -> str:
    name = f"billing_keep_collections_{flow}"
    drops = "".join(
        f"DROP TRIGGER IF EXISTS {name}_{e} ON {source};\n" for e in ("insert", "update", "delete", "truncate")
    )
    return f"{drops}DROP FUNCTION IF EXISTS {name}();\n"


SHARES_FIXED = """
CREATE FUNCTION billing_line_shares_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT status FROM billing_invoice WHERE id = OLD.invoice_id) <> 'draft' THEN
        RAISE EXCEPTION 'line item % of a non-draft invoice: its amount, department and invoice are fixed', OLD.id
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Payments and refunds were shared over the lines as they stand; issue a credit note instead.';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER billing_line_shares_fixed BEFORE UPDATE OF amount, department_id, invoice_id ON billing_lineitem
    FOR EACH ROW WHEN (OLD.amount IS DISTINCT FROM NEW.amount OR OLD.department_id IS DISTINCT FROM NEW.department_id
                       OR OLD.invoice_id IS DISTINCT FROM NEW.invoice_id)
    EXECUTE FUNCTION billing_line_shares_fixed();
CREATE FUNCTION billing_grand_total_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'invoice % is no longer a draft: its grand total is fixed', OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Payments and refunds were shared over its lines as they stand; issue a credit note instead.';
END;
$$;
CREATE TRIGGER billing_grand_total_fixed BEFORE UPDATE OF grand_total ON billing_invoice
    FOR EACH ROW WHEN (OLD.status <> 'draft' AND OLD.grand_total IS DISTINCT FROM NEW.grand_total)
    EXECUTE FUNCTION billing_grand_total_fixed();
"""
DROP_SHARES_FIXED = """
DROP TRIGGER IF EXISTS billing_line_shares_fixed ON billing_lineitem;
DROP FUNCTION IF EXISTS billing_line_shares_fixed();
DROP TRIGGER IF EXISTS billing_grand_total_fixed ON billing_invoice;
DROP FUNCTION IF EXISTS billing_grand_total_fixed();
"""

BACKFILL = f"""
INSERT INTO billing_collectionrollup ({KEY}, amount)
SELECT {KEY}, sum(amount)
  FROM ({" UNION ALL ".join(shares(*flow) for flow in FLOWS)}) AS share ({KEY}, amount)
 GROUP BY {KEY} ORDER BY {KEY};
ANALYZE billing_collectionrollup;
"""
# Updates change no indexed column: room on each page lets them stay HOT (as 0004's rollups).
CREATE = "ALTER TABLE billing_collectionrollup SET (fillfactor = 70);\n" + "".join(
    create_triggers(*flow) for flow in FLOWS
)
DROP = "".join(drop_triggers(*flow) for flow in FLOWS)


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0007_admin_list_order"),
        ("clinic", "0007_staff_branches_and_roles"),
    ]

    operations = [
        migrations.CreateModel(
            name="CollectionRollup",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "day",
                        "branch_id",
                        "flow",
                        "department_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("day", models.DateField(help_text="The payment's or refund's date: the branch's local day.")),
                ("flow", models.CharField(choices=[("received", "Received"), ("refunded", "Refunded")], max_length=8)),
                ("amount", models.DecimalField(decimal_places=12, default=Decimal("0.00"), max_digits=30)),
                (
                    "branch",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="clinic.branch",
                    ),
                ),
                (
                    "department",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="clinic.department",
                    ),
                ),
            ],
        ),
        migrations.RunSQL(SHARES_FIXED, DROP_SHARES_FIXED),
        migrations.RunSQL(CREATE + BACKFILL, DROP),
    ]

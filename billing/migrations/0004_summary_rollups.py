"""Rollups of the financial summary (billing.models: InvoiceRollup, LineRollup, PaymentRollup): billed
invoices, their lines by department and payments by mode, summed per branch and day and per branch and
calendar month, so that the summary reads whole months and the days around them instead of every invoice.

Statement-level AFTER triggers with transition tables keep them exact in the transaction of every change,
whatever writes the rows (services, admin, SQL, the COPY of generate_scale_data, which fires them once per
statement rather than per row). Each statement adds, per rollup key, the sum over its new rows minus the
sum over its old rows, skipping keys whose sums do not move, in key order so that concurrent writers lock
rows in one order (days before months). Invoices and lines count while billed (0003 copies that onto the
lines), so finalizing, cancelling and paying, and the lines following their invoice, move the figures.
Payments are insert-only (0002); an UPDATE or DELETE would be followed all the same. TRUNCATE of a source
empties its rollup.

The triggers come before the backfill: CREATE TRIGGER locks the three tables against writes until this
migration commits, so the backfill sees every committed row and no change slips in between.
"""

import django.db.models.deletion
from decimal import Decimal
from typing import NamedTuple
from django.db import migrations, models

BILLED = "('finalized', 'partially_paid', 'paid')"


class Rollup(NamedTuple):
    table: str
    source: str
    day: str  # the source's date column
    keys: list[str]  # branch_id and the other key columns, named alike in the source and the rollup
    measures: dict[str, str]  # rollup column: source expression
    counted: str  # which source rows count


ROLLUPS = [
    Rollup(
        "billing_invoicerollup",
        "billing_invoice",
        "date",
        ["branch_id"],
        {"billed": "grand_total", "paid": "paid"},
        f"status IN {BILLED}",
    ),
    Rollup(
        "billing_linerollup",
        "billing_lineitem",
        "invoice_date",
        ["branch_id", "department_id"],
        {"lines": "1", "taxable": "taxable_amount"},
        "billed",
    ),
    Rollup(
        "billing_paymentrollup",
        "billing_payment",
        "payment_date",
        ["branch_id", "payment_mode"],
        {"amount": "amount"},
        "true",
    ),
]
# Each source row counts in the row of its day and in the row of its month.
PERIODS = "(VALUES ('day', change.day), ('month', date_trunc('month', change.day::timestamp)::date))"


def key_columns(rollup: Rollup) -> list[str]:
    return [rollup.keys[0], "period", "period_start", *rollup.keys[1:]]


def apply_change(rollup: Rollup, transition_tables: list[str]) -> str:
    """Add to the rollup what one statement changed: its new rows, less its old rows."""
    measures = list(rollup.measures)
    selects = [
        f"SELECT {', '.join(rollup.keys)}, {rollup.day}, "
        + ", ".join(f"{'-' if table == 'old_rows' else ''}{expression}" for expression in rollup.measures.values())
        + f" FROM {table} WHERE {rollup.counted}"
        for table in transition_tables
    ]
    keys = ", ".join(key_columns(rollup))
    return f"""
        INSERT INTO {rollup.table} AS kept ({keys}, {", ".join(measures)})
        SELECT {keys}, {", ".join(f"sum({m})" for m in measures)}
          FROM ({" UNION ALL ".join(selects)}) AS change ({", ".join(rollup.keys)}, day, {", ".join(measures)})
         CROSS JOIN LATERAL {PERIODS} AS p (period, period_start)
         GROUP BY {keys}
        HAVING {" OR ".join(f"sum({m}) <> 0" for m in measures)}
         ORDER BY {keys}
            ON CONFLICT ({keys}) DO UPDATE
           SET {", ".join(f"{m} = kept.{m} + excluded.{m}" for m in measures)};"""


def function_name(rollup: Rollup) -> str:
    return rollup.table.replace("billing_", "billing_keep_")


def create_triggers(rollup: Rollup) -> str:
    name = function_name(rollup)
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN{apply_change(rollup, ["new_rows"])}
    ELSIF TG_OP = 'UPDATE' THEN{apply_change(rollup, ["new_rows", "old_rows"])}
    ELSIF TG_OP = 'DELETE' THEN{apply_change(rollup, ["old_rows"])}
    ELSE
        DELETE FROM {rollup.table};
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER {name}_insert AFTER INSERT ON {rollup.source}
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_update AFTER UPDATE ON {rollup.source}
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_delete AFTER DELETE ON {rollup.source}
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {name}();
CREATE TRIGGER {name}_truncate AFTER TRUNCATE ON {rollup.source}
    FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""


def drop_triggers(rollup: Rollup) -> str:
    name = function_name(rollup)
    events = ("insert", "update", "delete", "truncate")
    drops = "".join(f"DROP TRIGGER IF EXISTS {name}_{event} ON {rollup.source};\n" for event in events)
    return f"{drops}DROP FUNCTION IF EXISTS {name}();\n"


def backfill(rollup: Rollup) -> str:
    """The day rows from the source, the month rows from the day rows; in period order, as summaries read."""
    measures = list(rollup.measures)
    keys = ", ".join(rollup.keys)
    ordered = ", ".join(["period", "period_start", *rollup.keys])
    sums = ", ".join(f"sum({m})" for m in measures)
    return f"""
INSERT INTO {rollup.table} ({keys}, period, period_start, {", ".join(measures)})
SELECT {keys}, 'day', {rollup.day}, {", ".join(f"sum({e})" for e in rollup.measures.values())}
  FROM {rollup.source} WHERE {rollup.counted}
 GROUP BY {rollup.day}, {keys} ORDER BY {rollup.day}, {keys};
INSERT INTO {rollup.table} ({keys}, period, period_start, {", ".join(measures)})
SELECT {keys}, 'month', date_trunc('month', period_start::timestamp)::date AS month, {sums}
  FROM {rollup.table} WHERE period = 'day'
 GROUP BY month, {keys} ORDER BY month, {keys};
ANALYZE {rollup.table};
"""


# Updates change no indexed column: room on each page lets them stay HOT (no new index entries).
FILLFACTOR = "".join(f"ALTER TABLE {rollup.table} SET (fillfactor = 70);\n" for rollup in ROLLUPS)
CREATE = FILLFACTOR + "".join(create_triggers(rollup) for rollup in ROLLUPS)
BACKFILL = "".join(backfill(rollup) for rollup in ROLLUPS)
DROP = "".join(drop_triggers(rollup) for rollup in ROLLUPS)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0003_summary_denormalised'),
        ('clinic', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='InvoiceRollup',
            fields=[
                ('period', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=5)),
                ('period_start', models.DateField(help_text='The day, or the first day of the month.')),
                ('pk', models.CompositePrimaryKey('branch_id', 'period', 'period_start', blank=True, editable=False, primary_key=True, serialize=False)),
                ('billed', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
                ('paid', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
                ('branch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch')),
            ],
            options={
                'indexes': [models.Index(fields=['period', 'period_start'], name='invoicerollup_period')],
            },
        ),
        migrations.CreateModel(
            name='LineRollup',
            fields=[
                ('period', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=5)),
                ('period_start', models.DateField(help_text='The day, or the first day of the month.')),
                ('pk', models.CompositePrimaryKey('branch_id', 'period', 'period_start', 'department_id', blank=True, editable=False, primary_key=True, serialize=False)),
                ('lines', models.IntegerField(default=0)),
                ('taxable', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
                ('branch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch')),
                ('department', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.department')),
            ],
            options={
                'indexes': [models.Index(fields=['period', 'period_start'], name='linerollup_period')],
            },
        ),
        migrations.CreateModel(
            name='PaymentRollup',
            fields=[
                ('period', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=5)),
                ('period_start', models.DateField(help_text='The day, or the first day of the month.')),
                ('pk', models.CompositePrimaryKey('branch_id', 'period', 'period_start', 'payment_mode', blank=True, editable=False, primary_key=True, serialize=False)),
                ('payment_mode', models.CharField(choices=[('cash', 'Cash'), ('card', 'Card'), ('upi', 'UPI'), ('neft', 'NEFT'), ('cheque', 'Cheque'), ('online', 'Online'), ('insurance', 'Insurance')], max_length=20)),
                ('amount', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
                ('branch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch')),
            ],
            options={
                'indexes': [models.Index(fields=['period', 'period_start'], name='paymentrollup_period')],
            },
        ),
        migrations.RunSQL(CREATE + BACKFILL, DROP),
    ]

"""Billing for accountants (docs/api-rules.md §12): tax category and HSN/SAC on catalogue entries and lines,
credit notes with their own number series, refunds, and the summary's rollups for both.

Existing rows (the categories did not exist; every line carried only a rate):
- a catalogue entry at rate 0 becomes an `exempt` healthcare service with the SAC of its kind: 999316 for
  laboratory, radiology, imaging and diagnostic departments, 999314 for physiotherapy, 999312 (medical
  services) otherwise. An entry with a rate stays `taxable` at that rate (an administrator chose it: it may
  be goods, or a service that is not healthcare), with no HSN/SAC: each is printed for review, none guessed.
- a line at rate 0 becomes `exempt`, any other `taxable`; it takes its catalogue entry's HSN/SAC, if any.
- the invoice rollup's `paid` gives way to `outstanding` (the sum of balances, each never negative, which
  credits and refunds move), backfilled from the invoices.

Credit notes, their lines and refunds are immutable: a trigger refuses UPDATE and DELETE, as for payments.
"""

import importlib


import django.db.models.deletion
import django.db.models.expressions
import uuid
from decimal import Decimal
from django.db import migrations, models

ROLLUPS = importlib.import_module("billing.migrations.0004_summary_rollups")

INVOICE_ROLLUP = ROLLUPS.Rollup(
    "billing_invoicerollup",
    "billing_invoice",
    "date",
    ["branch_id"],
    {"billed": "grand_total", "outstanding": "GREATEST(grand_total - credited - paid + refunded, 0)"},
    f"status IN {ROLLUPS.BILLED}",
)
NEW_ROLLUPS = [
    ROLLUPS.Rollup("billing_creditrollup", "billing_creditnote", "date", ["branch_id"], {"amount": "total"}, "true"),
    ROLLUPS.Rollup("billing_refundrollup", "billing_refund", "refund_date", ["branch_id"], {"amount": "amount"}, "true"),
]
OLD_INVOICE_ROLLUP = ROLLUPS.ROLLUPS[0]

BACKFILL_OUTSTANDING = f"""
UPDATE billing_invoicerollup r SET outstanding = s.outstanding
  FROM (SELECT branch_id, 'day' AS period, date AS period_start,
               sum(GREATEST(grand_total - credited - paid + refunded, 0)) AS outstanding
          FROM billing_invoice WHERE status IN {ROLLUPS.BILLED} GROUP BY branch_id, date
        UNION ALL
        SELECT branch_id, 'month', date_trunc('month', date::timestamp)::date,
               sum(GREATEST(grand_total - credited - paid + refunded, 0))
          FROM billing_invoice WHERE status IN {ROLLUPS.BILLED}
         GROUP BY branch_id, date_trunc('month', date::timestamp)::date) s
 WHERE r.branch_id = s.branch_id AND r.period = s.period AND r.period_start = s.period_start;
"""

REFUSE_CHANGE = """
CREATE FUNCTION billing_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'billing % are immutable: % of % refused', TG_ARGV[0], TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Issue a new credit note or refund instead; they are never updated or deleted.';
END;
$$;
""" + "".join(
    f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
    f"FOR EACH ROW EXECUTE FUNCTION billing_refuse_change('{noun}');\n"
    for table, noun in [
        ("billing_creditnote", "credit notes"),
        ("billing_creditnoteline", "credit note lines"),
        ("billing_refund", "refunds"),
    ]
)
DROP_REFUSE_CHANGE = (
    "".join(
        f"DROP TRIGGER IF EXISTS {table}_immutable ON {table};\n"
        for table in ("billing_creditnote", "billing_creditnoteline", "billing_refund")
    )
    + "DROP FUNCTION IF EXISTS billing_refuse_change();\n"
)


def _sac_for(department: str) -> str:
    name = department.casefold()
    if any(word in name for word in ("lab", "patholog", "radiolog", "imaging", "diagnos")):
        return "999316"  # medical laboratory and diagnostic-imaging services
    if "physio" in name:
        return "999314"  # nursing and physiotherapeutic services
    return "999312"  # medical and dental services


def classify_existing(apps, schema_editor):
    """Tax category and HSN/SAC of the existing catalogue entries and lines (see the module docstring)."""
    service_model = apps.get_model("billing", "BillableService")
    for service in service_model.objects.select_related("department").filter(tax_rate=0):
        service.hsn_sac = service.hsn_sac or _sac_for(service.department.name)
        service.save(update_fields=["hsn_sac"])
    for service in service_model.objects.filter(tax_rate__gt=0).order_by("code"):
        service.tax_category = "taxable"
        service.save(update_fields=["tax_category"])
        print(f"\n  billing: review catalogue entry {service.code} ({service.name}): taxable at "
              f"{service.tax_rate}% with no HSN/SAC; classify it in the admin.", end="")
    with schema_editor.connection.cursor() as cursor:
        # Only rows that change are written (AddField filled every line with "exempt").
        cursor.execute("UPDATE billing_lineitem SET tax_category = 'taxable' WHERE tax_rate > 0")
        cursor.execute(
            """UPDATE billing_lineitem l SET hsn_sac = s.hsn_sac FROM billing_billableservice s
                WHERE l.service_id = s.id AND s.hsn_sac <> '' AND l.hsn_sac = ''"""
        )


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0005_records_never_deleted'),
        ('clinic', '0004_column_defaults'),
        ('patients', '0010_visit_history_entered_in_error'),
    ]

    operations = [
        migrations.CreateModel(
            name='CreditNote',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('credit_note_number', models.CharField(editable=False, max_length=40)),
                ('financial_year', models.CharField(editable=False, help_text='e.g. 2026-27', max_length=7)),
                ('date', models.DateField(help_text='Branch-local day of issue; its financial year decides the number series.')),
                ('reason', models.CharField(max_length=500)),
                ('taxable', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('cgst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('sgst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('igst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('tax', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('total', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, help_text="taxable + tax: what the invoice's net total goes down by.", max_digits=14)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.CharField(blank=True, help_text='"api:<client>", "staff:<user>" or "system".', max_length=200)),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='CreditNoteLine',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('position', models.PositiveSmallIntegerField(default=0)),
                ('service_name', models.CharField(max_length=200)),
                ('hsn_sac', models.CharField(blank=True, help_text='As on the invoice line.', max_length=8, verbose_name='HSN/SAC')),
                ('tax_category', models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], default='exempt', max_length=10)),
                ('tax_rate', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=5)),
                ('quantity', models.DecimalField(blank=True, decimal_places=3, help_text='Units credited; null for an amount credit.', max_digits=10, null=True)),
                ('taxable_amount', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('cgst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('sgst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('igst', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, max_digits=14)),
                ('amount', models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, help_text='taxable_amount + cgst + sgst + igst', max_digits=14)),
            ],
            options={
                'ordering': ['credit_note', 'position', 'id'],
            },
        ),
        migrations.CreateModel(
            name='CreditNoteNumberCounter',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('financial_year', models.CharField(help_text='e.g. 2026-27', max_length=7)),
                ('last_number', models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='CreditRollup',
            fields=[
                ('branch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch')),
                ('period', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=5)),
                ('period_start', models.DateField(help_text='The day, or the first day of the month.')),
                ('pk', models.CompositePrimaryKey('branch_id', 'period', 'period_start', blank=True, editable=False, primary_key=True, serialize=False)),
                ('amount', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
            ],
        ),
        migrations.CreateModel(
            name='Refund',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('amount', models.DecimalField(decimal_places=2, max_digits=12)),
                ('payment_mode', models.CharField(choices=[('cash', 'Cash'), ('card', 'Card'), ('upi', 'UPI'), ('neft', 'NEFT'), ('cheque', 'Cheque'), ('online', 'Online'), ('insurance', 'Insurance')], help_text='How the money went back.', max_length=20)),
                ('reference', models.CharField(blank=True, help_text='Required for every mode but cash.', max_length=100)),
                ('refund_date', models.DateField(help_text='The branch-local day the money was paid back.')),
                ('recorded_at', models.DateTimeField(auto_now_add=True)),
                ('recorded_by', models.CharField(blank=True, help_text='"api:<client>", "staff:<user>" or "system".', max_length=200)),
            ],
            options={
                'ordering': ['recorded_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='RefundRollup',
            fields=[
                ('branch', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch')),
                ('period', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=5)),
                ('period_start', models.DateField(help_text='The day, or the first day of the month.')),
                ('pk', models.CompositePrimaryKey('branch_id', 'period', 'period_start', blank=True, editable=False, primary_key=True, serialize=False)),
                ('amount', models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='invoice',
            name='invoice_amounts_not_negative',
        ),
        migrations.RemoveConstraint(
            model_name='invoice',
            name='invoice_paid_at_most_total',
        ),
        migrations.RemoveConstraint(
            model_name='invoice',
            name='invoice_status_matches_paid',
        ),
        migrations.RunSQL(
            ROLLUPS.drop_triggers(OLD_INVOICE_ROLLUP), ROLLUPS.create_triggers(OLD_INVOICE_ROLLUP)
        ),
        migrations.RemoveField(
            model_name='invoicerollup',
            name='paid',
        ),
        migrations.AddField(
            model_name='billableservice',
            name='hsn_sac',
            field=models.CharField(blank=True, help_text='SAC for a service (9993xx for healthcare), HSN for goods; 4, 6 or 8 digits.', max_length=8, verbose_name='HSN/SAC'),
        ),
        migrations.AddField(
            model_name='billableservice',
            name='tax_category',
            field=models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], default='exempt', max_length=10),
        ),
        migrations.AddField(
            model_name='invoice',
            name='credited',
            field=models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, help_text="Sum of the credit notes' totals.", max_digits=14),
        ),
        migrations.AddField(
            model_name='invoice',
            name='refunded',
            field=models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, help_text='Sum of the refunds.', max_digits=14),
        ),
        migrations.AddField(
            model_name='invoicerollup',
            name='outstanding',
            field=models.DecimalField(decimal_places=2, default=Decimal('0.00'), max_digits=18),
        ),
        migrations.AddField(
            model_name='lineitem',
            name='hsn_sac',
            field=models.CharField(blank=True, help_text='Copied from the catalogue entry, or as sent; blank when neither names one.', max_length=8, verbose_name='HSN/SAC'),
        ),
        migrations.AddField(
            model_name='lineitem',
            name='tax_category',
            field=models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], default='exempt', max_length=10),
        ),
        migrations.AlterField(
            model_name='billableservice',
            name='tax_rate',
            field=models.DecimalField(decimal_places=2, default=Decimal('0.00'), help_text='GST rate in percent: 0 unless taxable (5, 12, 18...).', max_digits=5),
        ),
        migrations.AlterField(
            model_name='invoice',
            name='paid',
            field=models.DecimalField(decimal_places=2, default=Decimal('0.00'), editable=False, help_text='Sum of the payments (gross).', max_digits=14),
        ),
        migrations.RunPython(classify_existing, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='billableservice',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('tax_category', 'taxable'), ('tax_rate__gt', 0)), models.Q(('tax_category__in', ('exempt', 'nil_rated', 'zero_rated')), ('tax_rate', 0)), _connector='OR'), name='billableservice_tax_category_matches_rate'),
        ),
        migrations.AddConstraint(
            model_name='billableservice',
            constraint=models.CheckConstraint(condition=models.Q(('hsn_sac', ''), ('hsn_sac__regex', '^([0-9]{4}|[0-9]{6}|[0-9]{8})$'), _connector='OR'), name='billableservice_hsn_sac_digits'),
        ),
        migrations.AddConstraint(
            model_name='invoice',
            constraint=models.CheckConstraint(condition=models.Q(('cgst__gte', 0), ('credited__gte', 0), ('discount__gte', 0), ('grand_total__gte', 0), ('igst__gte', 0), ('paid__gte', 0), ('refunded__gte', 0), ('sgst__gte', 0), ('sub_total__gte', 0), ('tax__gte', 0), ('taxable__gte', 0)), name='invoice_amounts_not_negative'),
        ),
        migrations.AddConstraint(
            model_name='invoice',
            constraint=models.CheckConstraint(condition=models.Q(('credited__lte', models.F('grand_total')), ('refunded__lte', models.F('paid')), ('paid__lte', django.db.models.expressions.CombinedExpression(models.F('grand_total'), '+', models.F('refunded')))), name='invoice_credited_refunded_bounded'),
        ),
        migrations.AddConstraint(
            model_name='invoice',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('credited', 0), ('paid', 0), ('refunded', 0), ('status__in', ['draft', 'cancelled'])), models.Q(('paid', models.F('refunded')), ('status', 'finalized')), models.Q(('paid__gt', models.F('refunded')), ('paid__lt', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('grand_total'), '-', models.F('credited')), '+', models.F('refunded'))), ('status', 'partially_paid')), models.Q(('paid__gte', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('grand_total'), '-', models.F('credited')), '+', models.F('refunded'))), ('status', 'paid')), _connector='OR'), name='invoice_status_matches_settlement'),
        ),
        migrations.AddConstraint(
            model_name='lineitem',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('tax_category', 'taxable'), ('tax_rate__gt', 0)), models.Q(('tax_category__in', ('exempt', 'nil_rated', 'zero_rated')), ('tax_rate', 0)), _connector='OR'), name='lineitem_tax_category_matches_rate'),
        ),
        migrations.AddConstraint(
            model_name='lineitem',
            constraint=models.CheckConstraint(condition=models.Q(('hsn_sac', ''), ('hsn_sac__regex', '^([0-9]{4}|[0-9]{6}|[0-9]{8})$'), _connector='OR'), name='lineitem_hsn_sac_digits'),
        ),
        migrations.AddField(
            model_name='creditnote',
            name='branch',
            field=models.ForeignKey(db_index=False, editable=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch'),
        ),
        migrations.AddField(
            model_name='creditnote',
            name='invoice',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='credit_notes', to='billing.invoice'),
        ),
        migrations.AddField(
            model_name='creditnoteline',
            name='credit_note',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='lines', to='billing.creditnote'),
        ),
        migrations.AddField(
            model_name='creditnoteline',
            name='line',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='credit_lines', to='billing.lineitem'),
        ),
        migrations.AddField(
            model_name='creditnotenumbercounter',
            name='branch',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clinic.branch'),
        ),
        migrations.AddField(
            model_name='refund',
            name='branch',
            field=models.ForeignKey(db_index=False, editable=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='clinic.branch'),
        ),
        migrations.AddField(
            model_name='refund',
            name='invoice',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='refunds', to='billing.invoice'),
        ),
        migrations.AddIndex(
            model_name='creditnote',
            index=models.Index(fields=['invoice', 'created_at'], name='creditnote_invoice'),
        ),
        migrations.AddIndex(
            model_name='creditnote',
            index=models.Index(fields=['branch', 'date'], include=('total',), name='creditnote_branch_date'),
        ),
        migrations.AddConstraint(
            model_name='creditnote',
            constraint=models.UniqueConstraint(fields=('branch', 'credit_note_number'), name='creditnote_number_unique_per_branch'),
        ),
        migrations.AddConstraint(
            model_name='creditnote',
            constraint=models.CheckConstraint(condition=models.Q(('cgst__gte', 0), ('igst__gte', 0), ('sgst__gte', 0), ('taxable__gte', 0), ('total__gt', 0)), name='creditnote_amounts_positive'),
        ),
        migrations.AddConstraint(
            model_name='creditnote',
            constraint=models.CheckConstraint(condition=models.Q(('tax', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('cgst'), '+', models.F('sgst')), '+', models.F('igst'))), ('total', django.db.models.expressions.CombinedExpression(models.F('taxable'), '+', models.F('tax')))), name='creditnote_totals_add_up'),
        ),
        migrations.AddConstraint(
            model_name='creditnote',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='creditnote_reason_not_empty'),
        ),
        migrations.AddConstraint(
            model_name='creditnoteline',
            constraint=models.CheckConstraint(condition=models.Q(('quantity__isnull', True), ('quantity__gt', 0), _connector='OR'), name='creditline_quantity'),
        ),
        migrations.AddConstraint(
            model_name='creditnoteline',
            constraint=models.CheckConstraint(condition=models.Q(('amount__gt', 0), ('cgst__gte', 0), ('igst__gte', 0), ('sgst__gte', 0), ('taxable_amount__gte', 0)), name='creditline_amounts_positive'),
        ),
        migrations.AddConstraint(
            model_name='creditnoteline',
            constraint=models.CheckConstraint(condition=models.Q(('amount', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('taxable_amount'), '+', models.F('cgst')), '+', models.F('sgst')), '+', models.F('igst')))), name='creditline_amount_adds_up'),
        ),
        migrations.AddConstraint(
            model_name='creditnoteline',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('tax_category', 'taxable'), ('tax_rate__gt', 0)), models.Q(('tax_category__in', ('exempt', 'nil_rated', 'zero_rated')), ('tax_rate', 0)), _connector='OR'), name='creditline_tax_category_matches_rate'),
        ),
        migrations.AddConstraint(
            model_name='creditnoteline',
            constraint=models.CheckConstraint(condition=models.Q(('hsn_sac', ''), ('hsn_sac__regex', '^([0-9]{4}|[0-9]{6}|[0-9]{8})$'), _connector='OR'), name='creditline_hsn_sac_digits'),
        ),
        migrations.AddConstraint(
            model_name='creditnotenumbercounter',
            constraint=models.UniqueConstraint(fields=('branch', 'financial_year'), name='creditnote_counter_per_branch_year'),
        ),
        migrations.AddIndex(
            model_name='creditrollup',
            index=models.Index(fields=['period', 'period_start'], name='creditrollup_period'),
        ),
        migrations.AddIndex(
            model_name='refund',
            index=models.Index(fields=['invoice', 'recorded_at'], name='refund_invoice'),
        ),
        migrations.AddIndex(
            model_name='refund',
            index=models.Index(fields=['branch', 'refund_date'], include=('amount',), name='refund_branch_date'),
        ),
        migrations.AddConstraint(
            model_name='refund',
            constraint=models.CheckConstraint(condition=models.Q(('amount__gt', 0)), name='refund_amount_positive'),
        ),
        migrations.AddConstraint(
            model_name='refund',
            constraint=models.CheckConstraint(condition=models.Q(('payment_mode__in', ['cash', 'card', 'upi', 'neft', 'cheque', 'online', 'insurance'])), name='refund_mode_valid'),
        ),
        migrations.AddConstraint(
            model_name='refund',
            constraint=models.CheckConstraint(condition=models.Q(('payment_mode', 'cash'), models.Q(('reference', ''), _negated=True), _connector='OR'), name='refund_reference_unless_cash'),
        ),
        migrations.AddConstraint(
            model_name='refund',
            constraint=models.UniqueConstraint(condition=models.Q(('payment_mode', 'cash'), _negated=True), fields=('invoice', 'payment_mode', 'reference'), name='refund_unique_reference_per_invoice'),
        ),
        migrations.AddIndex(
            model_name='refundrollup',
            index=models.Index(fields=['period', 'period_start'], name='refundrollup_period'),
        ),
        migrations.RunSQL(
            ROLLUPS.create_triggers(INVOICE_ROLLUP) + BACKFILL_OUTSTANDING,
            ROLLUPS.drop_triggers(INVOICE_ROLLUP),
        ),
        migrations.RunSQL(
            "".join(ROLLUPS.create_triggers(rollup) for rollup in NEW_ROLLUPS)
            + "".join(f"ALTER TABLE {rollup.table} SET (fillfactor = 70);\n" for rollup in NEW_ROLLUPS),
            "".join(ROLLUPS.drop_triggers(rollup) for rollup in NEW_ROLLUPS),
        ),
        migrations.RunSQL(REFUSE_CHANGE, DROP_REFUSE_CHANGE),
        # Database defaults: rows written by SQL (generate_scale_data's COPY) need not name the new columns.
        migrations.AlterField(
            model_name='billableservice',
            name='hsn_sac',
            field=models.CharField(blank=True, db_default='', default='', help_text='SAC for a service (9993xx for healthcare), HSN for goods; 4, 6 or 8 digits.', max_length=8, verbose_name='HSN/SAC'),
        ),
        migrations.AlterField(
            model_name='billableservice',
            name='tax_category',
            field=models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], db_default='exempt', default='exempt', max_length=10),
        ),
        migrations.AlterField(
            model_name='creditnoteline',
            name='hsn_sac',
            field=models.CharField(blank=True, db_default='', default='', help_text='As on the invoice line.', max_length=8, verbose_name='HSN/SAC'),
        ),
        migrations.AlterField(
            model_name='creditnoteline',
            name='tax_category',
            field=models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], db_default='exempt', default='exempt', max_length=10),
        ),
        migrations.AlterField(
            model_name='invoice',
            name='credited',
            field=models.DecimalField(db_default=Decimal('0.00'), decimal_places=2, default=Decimal('0.00'), editable=False, help_text="Sum of the credit notes' totals.", max_digits=14),
        ),
        migrations.AlterField(
            model_name='invoice',
            name='refunded',
            field=models.DecimalField(db_default=Decimal('0.00'), decimal_places=2, default=Decimal('0.00'), editable=False, help_text='Sum of the refunds.', max_digits=14),
        ),
        migrations.AlterField(
            model_name='lineitem',
            name='hsn_sac',
            field=models.CharField(blank=True, db_default='', default='', help_text='Copied from the catalogue entry, or as sent; blank when neither names one.', max_length=8, verbose_name='HSN/SAC'),
        ),
        migrations.AlterField(
            model_name='lineitem',
            name='tax_category',
            field=models.CharField(choices=[('exempt', 'Exempt (healthcare services by a clinical establishment)'), ('nil_rated', 'Nil rated'), ('zero_rated', 'Zero rated'), ('taxable', 'Taxable')], db_default='exempt', default='exempt', max_length=10),
        ),
    ]

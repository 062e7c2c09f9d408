"""The admin's "Issue credit note" page of an invoice (billing.admin.InvoiceAdmin.credit_note_view): a reason,
and per line of the invoice either nothing (the default), all that is left of it, a quantity or a taxable
amount. billing.services.credit_note_issue decides; its refusals come back as errors on the fields they
name (`lines.<i>.quantity` is the quantity of the i-th line credited)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms

from billing import services
from billing.models import Invoice, LineItem
from clinic.errors import DomainError, FieldError

_LINE_ERROR = re.compile(r"^lines\.(\d+)(?:\.(\w+))?$")


class CreditNoteReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 80}))


class CreditLineForm(forms.Form):
    line_id = forms.UUIDField(widget=forms.HiddenInput)
    whole = forms.BooleanField(required=False, label="All that is left")
    quantity = forms.DecimalField(required=False, min_value=Decimal("0.001"), max_digits=10, decimal_places=3)
    amount = forms.DecimalField(
        required=False, min_value=Decimal("0.01"), max_digits=12, decimal_places=2, label="Taxable amount"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        chosen = [name for name in ("whole", "quantity", "amount") if data.get(name) not in (None, False)]
        if len(chosen) > 1:
            raise forms.ValidationError("Choose one: all that is left, a quantity or a taxable amount.")
        return data

    def credit(self) -> services.CreditLineInput | None:
        """What this row asks to credit; None when it is left empty."""
        data = self.cleaned_data
        if not (data.get("whole") or data.get("quantity") or data.get("amount")):
            return None
        return services.CreditLineInput(
            line_id=data["line_id"], quantity=data.get("quantity"), amount=data.get("amount")
        )


CreditLineFormSet = forms.formset_factory(CreditLineForm, extra=0)


@dataclass(frozen=True)
class CreditRow:
    line: LineItem
    credited: Decimal  # what earlier credit notes took off this line, tax included
    form: CreditLineForm

    @property
    def quantity(self) -> str:
        return f"{self.line.quantity.normalize():f}"  # 2.000 -> 2, 10.000 -> 10 (not 1E+1)

    @property
    def gst(self) -> str:
        rate = f" {self.line.tax_rate.normalize():f}%" if self.line.tax_rate else ""
        return f"{self.line.get_tax_category_display()}{rate}"


class CreditNotePage:
    """The forms of the page, for an invoice loaded with everything its detail shows."""

    def __init__(self, invoice: Invoice, data: Mapping[str, Any] | None) -> None:
        self.lines = list(invoice.line_items.all())
        self.reason_form = CreditNoteReasonForm(data)
        self.formset = CreditLineFormSet(data, initial=[{"line_id": line.id} for line in self.lines], prefix="lines")
        self.credited: dict[uuid.UUID, Decimal] = {}
        for note in invoice.credit_notes.all():
            for credit in note.lines.all():
                self.credited[credit.line_id] = self.credited.get(credit.line_id, Decimal("0.00")) + credit.amount
        self.errors: list[str] = []  # of the whole page: what names no field
        self._asked: list[CreditLineForm] = []

    @property
    def rows(self) -> list[CreditRow]:
        forms_by_line = {str(form["line_id"].value()): form for form in self.formset.forms}
        return [
            CreditRow(line, self.credited.get(line.id, Decimal("0.00")), forms_by_line[str(line.id)])
            for line in self.lines
            if str(line.id) in forms_by_line
        ]

    def is_valid(self) -> bool:
        return self.reason_form.is_valid() and self.formset.is_valid()

    @property
    def reason(self) -> str:
        return str(self.reason_form.cleaned_data["reason"])

    def credits(self) -> list[services.CreditLineInput]:
        """The rows that ask for something, in page order (the service's `lines.<i>` index into them)."""
        self._asked = [form for form in self.formset.forms if form.credit() is not None]
        return [credit for form in self._asked if (credit := form.credit()) is not None]

    def add_service_error(self, exc: DomainError) -> None:
        """A refusal of billing.services.credit_note_issue, on the field it names, else on the page."""
        if not isinstance(exc, FieldError):
            self.errors.append(exc.detail)
            return
        for key, message in exc.errors.items():
            match = _LINE_ERROR.match(key)
            if key == "reason":
                self.reason_form.add_error("reason", message)
            elif match and int(match[1]) < len(self._asked):
                field = match[2] if match[2] in ("quantity", "amount") else None
                self._asked[int(match[1])].add_error(field, message)
            else:
                self.errors.append(message)

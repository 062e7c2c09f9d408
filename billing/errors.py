"""The billing app's domain errors; the generic ones (NotFound, Conflict, InvalidState, FieldError) are in
clinic.errors."""

from __future__ import annotations

from clinic.errors import Conflict


class DuplicatePayment(Conflict):
    code = "duplicate_payment"
    title = "Duplicate payment"
    description = "The invoice already has a payment with this payment_mode and reference."


class DuplicateRefund(Conflict):
    code = "duplicate_refund"
    title = "Duplicate refund"
    description = "The invoice already has a refund with this payment_mode and reference."

"""The pharmacy's domain errors (docs/api-rules.md §14), each declaring its status, code and title once; the
generic ones (NotFound, Conflict, InvalidState, FieldError) are in clinic.errors."""

from __future__ import annotations

from clinic.errors import Conflict


class InsufficientStock(Conflict):
    """409: more units asked for than the branch holds (non-expired, or in the named batch)."""

    code = "insufficient_stock"
    title = "Insufficient stock"
    description = (
        "More units were asked for than are on hand: of the drug's non-expired batches at the branch, or of the "
        "named batch. `drug` names the drug and `available` (an integer) what is on hand."
    )

    def __init__(self, detail: str, *, drug: str, available: int) -> None:
        super().__init__(detail, drug=drug, available=available)


class ExceedsPrescription(Conflict):
    """409: more of a drug than its prescription item still allows."""

    code = "exceeds_prescription"
    title = "Exceeds the prescription"
    description = (
        "More units than the prescription item still allows (prescribed less dispensed, returns added back). "
        "`drug` names the drug and `remaining` what may still be dispensed."
    )

    def __init__(self, detail: str, *, drug: str, remaining: int) -> None:
        super().__init__(detail, drug=drug, remaining=remaining)


class PrescriptionRequired(Conflict):
    """409: a Schedule H, H1 or X drug dispensed without a prescription."""

    code = "prescription_required"
    title = "Prescription required"
    description = "Schedule H, H1 and X drugs are dispensed against a prescription only; `drug` names the drug."

    def __init__(self, detail: str, *, drug: str) -> None:
        super().__init__(detail, drug=drug)


class NotPrescribed(Conflict):
    """409: a dispense against a prescription names a drug the prescription does not hold."""

    code = "not_prescribed"
    title = "Not on the prescription"
    description = (
        "A dispense against a prescription may only hand over the prescription's drugs; `drug` names the drug. "
        "Dispense anything else separately (an OTC drug without the prescription)."
    )

    def __init__(self, detail: str, *, drug: str) -> None:
        super().__init__(detail, drug=drug)


class BatchExpired(Conflict):
    """409: the named batch is past its expiry date at the branch."""

    code = "batch_expired"
    title = "Batch expired"
    description = "The named batch has expired (its expiry date is not after today at the branch): never dispensed."

    def __init__(self, detail: str, *, drug: str, batch: str) -> None:
        super().__init__(detail, drug=drug, batch=batch)


class ExceedsDispensed(Conflict):
    """409: more units returned than the dispense line handed over less what already came back."""

    code = "exceeds_dispensed"
    title = "Exceeds what was dispensed"
    description = (
        "More units returned than were dispensed on the line less those already returned; `line_id` names the "
        "line and `returnable` what may still come back."
    )

    def __init__(self, detail: str, *, line_id: str, returnable: int) -> None:
        super().__init__(detail, line_id=line_id, returnable=returnable)

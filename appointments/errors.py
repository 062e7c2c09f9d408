"""The appointments app's domain errors; the generic ones (NotFound, Conflict, InvalidState, FieldError) are
in clinic.errors."""

from __future__ import annotations

from clinic.errors import Conflict, DomainError


class SlotUnavailable(Conflict):
    code = "slot_unavailable"
    title = "Slot unavailable"
    description = "The interval is not a free slot of the doctor, or the patient already has an appointment then."


class CancellationWindow(Conflict):
    code = "cancellation_window"
    title = "Inside the cancellation window"
    description = (
        "The appointment starts within the branch's cancellation window; only staff can cancel it now. "
        "See cancellable_until."
    )


class OutsideAllowedTime(Conflict):
    """A status change asked for at a time the appointment's schedule does not allow (docs/api-rules.md §7)."""

    code = "outside_allowed_time"
    title = "Not allowed at this time"
    description = (
        "The status change is not allowed yet or any more: check-in only on the appointment's local day, no-show "
        "only once it has started. See allowed_from (and allowed_until)."
    )


class UnsafeReset(DomainError):
    """A staff reset of a token sequence refused (appointments.token_sequence). Only the
    reset_token_sequence command sees it, so it is no problem kind of the API: no code of its own."""

"""The lab app's domain errors; the generic ones (NotFound, Conflict, InvalidState, FieldError) are in
clinic.errors."""

from __future__ import annotations

"""billing.representations: what mypy cannot tie to the models."""

from __future__ import annotations

from typing import get_args

from billing.models import Payment
from billing.representations import PaymentMode


def test_the_payment_mode_literal_is_every_payment_mode_in_order():
    # The Literal documents the modes (PaymentModeEnum); a mode added to the model must be added to it.
    assert list(get_args(PaymentMode)) == Payment.Mode.values

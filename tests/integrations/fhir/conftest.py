from __future__ import annotations

from typing import Any

import pytest

from tests.emr.world import RecordWorld, make_record_world

ALL_READ = ["patients:read", "appointments:read", "emr:read", "lab:read", "pharmacy:read"]


@pytest.fixture
def world(token_for: Any) -> RecordWorld:
    return make_record_world(token_for)


@pytest.fixture(autouse=True)
def validate_everything_emitted(settings: Any) -> None:
    """Production samples (FHIR_VALIDATE_OUTPUT=sample); the tests check every resource the server emits."""
    settings.FHIR_VALIDATE_OUTPUT = "all"

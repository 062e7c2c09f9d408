from __future__ import annotations

from typing import Any

import pytest

from tests.emr.world import RecordWorld, make_record_world

ALL_READ = ["patients:read", "appointments:read", "emr:read", "lab:read", "pharmacy:read"]


@pytest.fixture
def world(token_for: Any) -> RecordWorld:
    return make_record_world(token_for)

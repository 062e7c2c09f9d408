"""Fixtures several patient test modules share; a module that needs another shape defines its own."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import BranchFactory


@pytest.fixture
def branch() -> Any:
    return BranchFactory(code="BLR", time_zone="Asia/Kolkata")


@pytest.fixture
def reader(branch: Any, token_for: Any) -> str:
    """A token that reads patients at BLR only."""
    return token_for(["patients:read"], branches=[branch])

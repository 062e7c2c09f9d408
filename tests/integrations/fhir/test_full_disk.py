"""FHIR on a full disk (docs/operations.md §5): the $export kick-off, a write, answers 503 with Retry-After in an
OperationOutcome that says why, never a 500; once there is room again the same request is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.fhir.models import ExportJob
from tests.factories import BranchFactory
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import assert_outcome, fhir_get
from tests.operations.test_database_resource_errors import FullTablespace, full_tablespace

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["full_tablespace"]


@pytest.fixture(autouse=True)
def _export_dir(settings: Any, tmp_path: Any) -> None:
    settings.FHIR_EXPORT_DIR = tmp_path / "exports"


def test_an_export_kick_off_on_a_full_disk_is_503_with_retry_after(
    token_for: Any, full_tablespace: FullTablespace
) -> None:
    token = token_for(ALL_READ, branches=[BranchFactory(code="BLR")])
    full_tablespace.move(ExportJob._meta.db_table)
    full_tablespace.fill()

    refused = fhir_get(token, "$export", HTTP_PREFER="respond-async", HTTP_ACCEPT="application/fhir+json")

    diagnostics = assert_outcome(refused, 503, "transient")
    assert refused["Retry-After"] == "5"
    assert "retry" in diagnostics
    assert not ExportJob.objects.exists()
    full_tablespace.free()
    accepted = fhir_get(token, "$export", HTTP_PREFER="respond-async", HTTP_ACCEPT="application/fhir+json")
    assert accepted.status_code == 202, accepted.content

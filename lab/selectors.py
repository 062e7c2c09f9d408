"""Reads of the lab catalogue and orders, always through the calling client's branch restriction."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from lab.models import Analyte, LabTest, ReferenceRange

# --- Catalogue ---------------------------------------------------------------------------------------------
# The catalogue is the same at every branch: no branch restriction applies to it.


def lab_tests(*, kind: str | None = None, modality: str | None = None) -> QuerySet[LabTest]:
    """The active tests of the catalogue in code order, with their billing item, analytes (by position,
    then code) and each analyte's reference ranges (by sex, then age band) read in three more queries
    however many tests a page holds."""
    tests = LabTest.objects.filter(active=True)
    if kind is not None:
        tests = tests.filter(kind=kind)
    if modality is not None:
        tests = tests.filter(modality=modality)
    ranges = ReferenceRange.objects.order_by("sex", "age_min_days", "id")
    analytes = Analyte.objects.order_by("position", "code").prefetch_related(Prefetch("ranges", queryset=ranges))
    return (
        tests.select_related("billable_service")
        .prefetch_related(Prefetch("analytes", queryset=analytes))
        .order_by("code")
    )

"""Slot searches page like every other search (docs/fhir.md §4): `_count` (capped), `_offset`, `_sort`,
`_summary=count`, `_total`, with absolute next links that walk a 14-day range once; reads have an ETag."""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from appointments.models import WeeklySession
from integrations.fhir import r4
from tests.appointments.factories import WeeklySessionFactory, future_monday
from tests.emr.world import RecordWorld
from tests.integrations.fhir.helpers import assert_outcome, entries, fhir_get, ids

pytestmark = pytest.mark.django_db


@pytest.fixture
def fortnight(world: RecordWorld) -> Any:
    """Every day 09:00-19:00 in 30-minute cells: 20 a day, 280 in 14 days."""
    doctor = world.pharmacy.doctor
    doctor.default_slot_minutes = 30
    doctor.save(update_fields=["default_slot_minutes"])
    for weekday in WeeklySession.Weekday:
        WeeklySessionFactory(doctor=doctor, branch=world.blr, weekday=weekday, start=time(9, 0), end=time(19, 0))
    return future_monday()


def _range(world: RecordWorld, first: Any, days: int) -> str:
    last = first + timedelta(days=days - 1)
    return f"Slot?practitioner={world.pharmacy.doctor.id}&start=ge{first.isoformat()}&start=le{last.isoformat()}"


def _links(response: Any) -> dict[str, str]:
    return {link["relation"]: link["url"] for link in response.json()["link"]}


def test_a_fourteen_day_range_comes_back_in_pages_walked_by_next_links(
    world: RecordWorld, token_for: Any, fortnight: Any
) -> None:
    token = token_for(["appointments:read"])
    url = _range(world, fortnight, 14)

    first = fhir_get(token, url)
    assert first.json()["total"] == 280
    assert len(ids(first)) == 20  # the default page, as every search
    r4.validate(first.json())

    seen: list[str] = []
    starts: list[str] = []
    pages = 0
    url = f"{url}&_count=100"
    while url:
        page = fhir_get(token, url)
        assert page.json()["total"] == 280
        seen += ids(page)
        starts += [slot["start"] for slot in entries(page)]
        following = _links(page).get("next", "")
        assert not following or following.startswith("http://testserver/fhir/R4/Slot?")
        url = following.removeprefix("http://testserver/fhir/R4/")
        pages += 1
    assert pages == 3
    assert len(seen) == len(set(seen)) == 280
    assert starts == sorted(starts)


def test_slot_paging_sorting_capping_and_counting(world: RecordWorld, token_for: Any, fortnight: Any) -> None:
    token = token_for(["appointments:read"])
    day = _range(world, fortnight, 1)
    whole = ids(fhir_get(token, f"{day}&_count=100"))
    assert len(whole) == 20

    assert ids(fhir_get(token, f"{day}&_count=5&_offset=5")) == whole[5:10]
    assert ids(fhir_get(token, f"{day}&_sort=-start&_count=100")) == list(reversed(whole))
    capped = fhir_get(token, f"{_range(world, fortnight, 14)}&_count=1000")
    assert len(ids(capped)) == 100
    assert parse_qs(urlsplit(_links(capped)["self"]).query)["_count"] == ["100"]
    counted = fhir_get(token, f"{day}&_summary=count").json()
    assert (counted["total"], counted["entry"]) == (20, [])
    uncounted = fhir_get(token, f"{day}&_total=none&_count=5")
    assert "total" not in uncounted.json()
    assert "next" in _links(uncounted)
    [cut] = entries(fhir_get(token, f"{day}&_elements=start&_count=1"))
    assert set(cut) == {"resourceType", "id", "meta", "start", "end", "status", "schedule"}  # required in R4
    r4.validate(cut)
    assert_outcome(fhir_get(token, f"{day}&_sort=end"), 400, "invalid", ["_sort"])
    assert_outcome(fhir_get(token, f"{day}&_count=-1"), 400, "invalid", ["_count"])
    assert_outcome(fhir_get(token, f"{day}&_offset=x"), 400, "invalid", ["_offset"])
    assert_outcome(fhir_get(token, f"{day}&_include=Slot:schedule"), 400, "not-supported", ["_include"])


def test_a_slot_read_has_an_etag(world: RecordWorld, token_for: Any, fortnight: Any) -> None:
    token = token_for(["appointments:read"])
    [slot] = entries(fhir_get(token, f"{_range(world, fortnight, 1)}&_count=1"))

    read = fhir_get(token, f"Slot/{slot['id']}")
    again = fhir_get(token, f"Slot/{slot['id']}", HTTP_IF_NONE_MATCH=read["ETag"])

    assert read.json() == slot
    assert (again.status_code, again.content) == (304, b"")

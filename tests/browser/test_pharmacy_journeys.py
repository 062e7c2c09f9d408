"""The pharmacist's day in a real browser at 1366x768, logged in through the login page as a member of the
pharmacist group limited to BLR: receive a batch, dispense a prescription from its page (the batch expiring
first is suggested and taken), return a line, and find the drug in the below-reorder list. Another branch's
pharmacist reaches none of it by URL. Screenshots go to test-artifacts/screenshots/ to look at."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group

from pharmacy.models import Batch, Dispense, DispenseReturn, StockMovement
from tests.browser.conftest import ADMIN_PASSWORD
from tests.factories import staff_of
from tests.pharmacy.factories import PharmacyWorld, make_pharmacy_world, on_hand, today

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@pytest.fixture
def world() -> PharmacyWorld:
    return make_pharmacy_world(lambda *args, **kwargs: "")  # no API client is used here


def _log_in(page: Any, django_user_model: Any, name: str, *branches: Any) -> Any:
    user = django_user_model.objects.create_user(name, f"{name}@clinic.invalid", ADMIN_PASSWORD, is_staff=True)
    staff_of(user, *branches)
    user.groups.add(Group.objects.get(name="pharmacist"))
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", name)
    page.fill("#id_password", ADMIN_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return user


def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_receive_dispense_fefo_return_and_find_the_drug_below_reorder(page, world, django_user_model, settings):
    settings.ADMIN_REQUIRE_2FA = False
    late = world.receive(world.amox, "LATE-9", 20, expires_in_days=300)
    prescription = world.prescribe((world.amox, 6))
    world.reorder(world.amox, 30)
    _log_in(page, django_user_model, "asha", world.blr)

    # Receive a batch that expires before the one on the shelf.
    page.goto("/admin/pharmacy/batch/")
    page.click(".object-tools >> text=Receive stock")
    page.wait_for_selector("#receive_form")
    assert page.locator("#id_branch option").all_inner_texts() == [str(world.blr)]
    # The drug is typed, not scrolled: the admin's autocomplete over the drug list's search.
    page.click("#receive_form .select2-selection")
    page.fill(".select2-search__field", world.amox.code)
    page.click(f".select2-results__option >> text={world.amox}")
    page.fill("#id_batch_number", "EARLY-1")
    page.fill("#id_expiry_date", (today() + timedelta(days=60)).isoformat())
    page.fill("#id_quantity", "10")
    page.fill("#id_unit_cost", "4.00")
    page.fill("#id_mrp", "6.50")
    _shot(page, "pharmacy-receive-stock")
    page.click("input[type=submit][value=Receive]")
    page.wait_for_selector("text=Received 10 units of AMOX500 batch EARLY-1 at BLR: 10 on hand.")
    early = Batch.objects.get(batch_number="EARLY-1")
    assert (early.branch, early.quantity_on_hand, str(early.mrp)) == (world.blr, 10, "6.50")
    assert StockMovement.objects.filter(batch=early).values_list("kind", "actor").get() == ("receipt", "staff:asha")

    # Dispense the prescription: the earlier-expiring batch is suggested and taken.
    page.goto(f"/admin/pharmacy/prescription/{prescription.pk}/change/")
    page.click(".object-tools >> text=Dispense")
    page.wait_for_selector("#dispense_items")
    suggestion = page.locator("tr.item[data-drug=AMOX500] td.suggestion").inner_text()
    assert suggestion.startswith("6 from batch EARLY-1")
    assert "LATE-9" not in suggestion
    assert page.input_value("#id_item-0-quantity") == "6"
    _shot(page, "pharmacy-dispense-fefo")
    page.click("input[type=submit][value=Dispense]")
    dispense = _wait_for_dispense(page)
    page.wait_for_selector(f"text=Dispensed {dispense.dispense_number}: 6 AMOX500 from batch EARLY-1.")
    assert list(dispense.lines.values_list("batch__batch_number", "quantity")) == [("EARLY-1", 6)]
    assert (on_hand(early), on_hand(late)) == (4, 20)

    # Return one unit of the line from the dispense page.
    page.click(".object-tools >> text=Return drugs")
    page.wait_for_selector("#return_lines")
    page.fill("#id_line-0-quantity", "1")
    page.fill("#id_reason", "Patient had some at home")
    _shot(page, "pharmacy-return")
    page.click("input[type=submit][value='Return to stock']")
    page.wait_for_selector("text=1 unit returned to stock.")
    assert DispenseReturn.objects.get().reason == "Patient had some at home"
    assert on_hand(early) == 5
    prescription.refresh_from_db()
    assert prescription.items.get().dispensed_quantity == 5

    # 25 in date against a level of 30: the drug is in the below-reorder list.
    page.goto("/admin/pharmacy/reorderlevel/")
    page.click("#changelist-filter a:has-text('Below the reorder level')")
    page.wait_for_url("**stock=below**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("th, td").all_inner_texts() == [  # no actions: no checkbox column
        str(world.amox),
        str(world.blr),
        "30",
        "25",
        "BELOW reorder level",
    ]
    _shot(page, "pharmacy-below-reorder")


def _wait_for_dispense(page: Any) -> Dispense:
    page.wait_for_url("**/admin/pharmacy/dispense/*/change/")
    return Dispense.objects.get()


def test_another_branchs_pharmacist_reaches_nothing_by_url(page, world, django_user_model, settings):
    settings.ADMIN_REQUIRE_2FA = False
    world.receive(world.amox, "LATE-9", 20)
    prescription = world.prescribe((world.amox, 6))
    dispense = world.dispense((world.amox, 2), prescription=prescription)
    world.reorder(world.amox, 30)
    _log_in(page, django_user_model, "ravi", world.mum)

    for url in (
        f"/admin/pharmacy/prescription/{prescription.pk}/dispense/",
        f"/admin/pharmacy/dispense/{dispense.pk}/return/",
    ):
        response = page.goto(url)
        assert response.status == 404, url
    page.goto("/admin/pharmacy/reorderlevel/?stock=below")
    assert page.locator("#result_list").count() == 0  # an empty list has no table
    assert "0 reorder levels" in page.locator("#changelist-form").inner_text()
    assert (on_hand(dispense.lines.get().batch), Dispense.objects.count()) == (18, 1)

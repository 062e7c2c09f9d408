"""The channels' allow-lists administered in a real browser (docs/hl7-inbound.md, docs/dicom-worklist.md): a
laboratory registered as an HL7 sender whose result then arrives through the real listener and is shown on
the received-messages page, a second registration of its identity refused, and a DICOM calling AE title that
is accepted from any address only when that is ticked, and flagged wherever it shows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import hl7
import pytest
from hl7.client import MLLPClient

from integrations.dicom.models import DicomCallingAE
from integrations.hl7.models import Hl7ReceivedMessage, Hl7Sender
from lab.models import LabResult
from tests.factories import BranchFactory
from tests.integrations.hl7.support import ListenerThread, lab_world, oru

pytestmark = pytest.mark.django_db(transaction=True)

SENDERS = "/admin/integrations/hl7sender/"
RECEIVED = "/admin/integrations/hl7receivedmessage/"
CALLING_AES = "/admin/integrations/dicomcallingae/"


def register_sender(page: Any, *, name: str, application: str, facility: str, branch: Any) -> None:
    page.goto(f"{SENDERS}add/")
    page.fill("#id_name", name)
    page.fill("#id_networks", "127.0.0.1/32")
    page.select_option("#id_branches_from", label=str(branch))
    page.click("#id_branches_add")
    page.fill("#id_sending_application", application)
    page.fill("#id_sending_facility", facility)
    page.click("input[name=_save]")


def test_a_laboratory_registered_in_the_admin_reports_a_result_that_the_admin_then_shows(admin_page):
    page = admin_page
    world = lab_world()
    register_sender(page, name="City lab", application="LIS", facility="CITYLAB", branch=world["blr"])
    page.wait_for_url(f"**{SENDERS}")
    sender = Hl7Sender.objects.get()
    assert (sender.name, sender.networks, sender.sending_application, sender.sending_facility) == (
        "City lab",
        ["127.0.0.1/32"],
        "LIS",
        "CITYLAB",
    )
    assert list(sender.branches.all()) == [world["blr"]]
    cells = [cell.strip() for cell in page.locator("#result_list tbody tr").first.locator("th, td").all_inner_texts()]
    assert cells[1:5] == ["City lab", "127.0.0.1/32", "LIS/CITYLAB", "BLR"]

    accession = world["items"]["CBC"].accession_number
    message = oru("LISMSG-000777", accession, world["patient"].patient_id, [("NM", "HGB", "13.2", "g/dL")])
    listener = ListenerThread().start()
    try:
        with MLLPClient("127.0.0.1", listener.port) as client:
            ack = hl7.parse(client.send_message(message))
    finally:
        listener.stop()
    assert str(ack.segment("MSA")(1)) == "AA"
    assert LabResult.objects.get(item=world["items"]["CBC"]).value_quantity == Decimal("13.2")

    received = Hl7ReceivedMessage.objects.get()
    page.goto(RECEIVED)
    page.click("text=LISMSG-000777")
    page.wait_for_url(f"**{RECEIVED}{received.pk}/change/")
    assert page.inner_text(".field-sender .readonly") == "City lab"
    assert page.inner_text(".field-content_sha256 .readonly") == received.content_sha256
    assert len(received.content_sha256) == 64
    assert "MSA|AA|LISMSG-000777" in page.inner_text(".field-ack_text .readonly")


def test_a_second_sender_presenting_a_registered_identity_is_refused_whatever_its_case(admin_page):
    page = admin_page
    blr = BranchFactory(code="BLR")
    register_sender(page, name="City lab", application="LIS", facility="CITYLAB", branch=blr)
    page.wait_for_url(f"**{SENDERS}")

    register_sender(page, name="Another lab", application="lis", facility="citylab", branch=blr)
    error = page.inner_text(".field-sending_application .errorlist")
    assert error == "lis/citylab is registered to the sender 'City lab' already."
    assert list(Hl7Sender.objects.values_list("name", flat=True)) == ["City lab"]


def test_a_calling_ae_title_needs_its_addresses_or_an_explicit_any_address_which_is_flagged(admin_page):
    page = admin_page
    branch = BranchFactory(code="BLR", name="Bengaluru Central")

    page.goto(f"{CALLING_AES}add/")
    page.fill("#id_ae_title", "BLR_CT1")
    page.select_option("#id_branch", label=str(branch))
    page.click("input[name=_save]")
    assert page.inner_text(".field-networks .errorlist") == (
        "Give the addresses the modality connects from, or tick 'any address'."
    )
    assert not DicomCallingAE.objects.exists()

    page.check("#id_any_address")
    page.click("input[name=_save]")
    page.wait_for_url(f"**{CALLING_AES}")
    assert "BLR_CT1 is accepted from ANY address" in page.inner_text(".messagelist")
    entry = DicomCallingAE.objects.get()
    assert (entry.ae_title, entry.branch, entry.networks, entry.any_address) == ("BLR_CT1", branch, [], True)
    assert page.inner_text("#result_list td.field-addresses") == "⚠ ANY ADDRESS"

    page.click("#result_list th.field-ae_title a")
    page.wait_for_url(f"**{CALLING_AES}{entry.pk}/change/")
    assert "BLR_CT1 is accepted from ANY address" in page.inner_text(".messagelist")
    page.fill("#id_networks", "10.0.0.12,10.0.1.0/24")
    page.uncheck("#id_any_address")
    page.click("input[name=_save]")
    page.wait_for_url(f"**{CALLING_AES}")
    entry.refresh_from_db()
    assert (entry.networks, entry.any_address) == (["10.0.0.12", "10.0.1.0/24"], False)
    assert page.inner_text("#result_list td.field-addresses") == "10.0.0.12, 10.0.1.0/24"
    assert "ANY ADDRESS" not in page.content()

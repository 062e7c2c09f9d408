"""Who may report what (docs/hl7-inbound.md): registered senders bound to networks, branches and MSH-3/MSH-4;
the duplicate key on the registered sender plus MSH-10 with a content check; PID required and matched in any
PID-3 repetition. Each refusal leaves the database as it was."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from integrations.hl7.models import Hl7ReceivedMessage
from integrations.webhooks.models import WebhookEvent
from lab.models import LabResult
from tests.integrations.hl7.inbound_support import handle, message, sender, two_branch_world

pytestmark = pytest.mark.django_db(transaction=True)

HGB = "NM|718-7^Hemoglobin^LN^HGB^Haemoglobin^L||{}|g/dL^^UCUM|12.0-15.5||||F"


def _critical_events() -> int:
    return WebhookEvent.objects.filter(type="lab_result.critical").count()


@pytest.fixture
def world() -> dict[str, Any]:
    return two_branch_world()


def test_colliding_control_ids_from_two_senders_calling_themselves_alike_are_both_applied(world: Any) -> None:
    """The reported loss: two lab systems both presenting LIS/LAB and the same MSH-10; the second message, a
    critical HGB for the other branch, was answered with the first's stored AA and dropped."""
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    sender("Metro lab", ["10.2.0.0/16"], [world["mum"]])
    patient_id = world["patient"].patient_id
    first = handle(
        message("LISMSG-000777", world["items"]["CBC"].accession_number, [HGB.format("13.1")], pid3=patient_id)
    )
    second = handle(
        message("LISMSG-000777", world["mum_cbc"].accession_number, [HGB.format("3.0")], pid3=patient_id),
        peer="10.2.0.9",
    )
    assert (first.code, first.control_id, first.errors) == ("AA", "LISMSG-000777", [])
    assert (second.code, second.control_id, second.errors) == ("AA", "LISMSG-000777", [])
    stored = {
        r.item.order.branch.code: (str(r.value_quantity), r.flag)
        for r in LabResult.objects.select_related("item__order__branch")
    }
    assert stored == {"BLR": ("13.1000", "N"), "MUM": ("3.0000", "LL")}
    assert _critical_events() == 1
    assert sorted(Hl7ReceivedMessage.objects.values_list("sender__name", "control_id")) == [
        ("City lab", "LISMSG-000777"),
        ("Metro lab", "LISMSG-000777"),
    ]


def test_registered_identities_keep_their_own_keys_for_one_control_id(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]], application="LIS", facility="CITYLAB")
    sender("Metro lab", ["10.1.0.0/16"], [world["mum"]], application="LIS", facility="METRO")
    patient_id = world["patient"].patient_id
    city = message(
        "M1", world["items"]["CBC"].accession_number, [HGB.format("13")], pid3=patient_id, facility="CITYLAB"
    )
    metro = message("M1", world["mum_cbc"].accession_number, [HGB.format("14")], pid3=patient_id, facility="METRO")
    assert handle(city).code == "AA"
    assert handle(metro).code == "AA"
    assert LabResult.objects.count() == 2


@pytest.mark.parametrize(("application", "facility"), [("LIS", "CITYLAB"), ("lis", "citylab")])
def test_a_message_presenting_another_senders_identity_is_ar_and_applies_nothing(
    world: Any, application: str, facility: str
) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]], application="LIS", facility="CITYLAB")
    sender("Anyone", ["10.2.0.0/16"], [world["blr"]])
    text = message(
        "X1",
        world["items"]["CBC"].accession_number,
        [HGB.format("3.0")],
        pid3=world["patient"].patient_id,
        application=application,
        facility=facility,
    )
    ack = handle(text, peer="10.2.0.9")
    assert (ack.code, ack.control_id, ack.errors) == ("AR", "X1", [("204", "MSH^1^3")])
    assert ack.err_texts == ["MSH-3/MSH-4 is not registered to a sender at this address."]
    assert LabResult.objects.count() == 0
    assert Hl7ReceivedMessage.objects.count() == 0
    assert _critical_events() == 0
    # From its own address it is applied.
    assert handle(text, peer="10.1.2.3").code == "AA"


def test_an_address_outside_every_sender_and_an_unregistered_identity_are_ar(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]], application="LIS", facility="CITYLAB")
    text = message("X2", world["items"]["CBC"].accession_number, [HGB.format("13")], pid3=world["patient"].patient_id)
    assert handle(text, peer="10.9.9.9").errors == [("204", "MSH^1^3")]  # no sender at this address
    assert handle(text, peer="10.1.0.5").errors == [("204", "MSH^1^3")]  # LIS/LAB is not City lab's identity
    assert LabResult.objects.count() == 0


def test_an_order_at_another_branch_is_answered_exactly_like_an_unknown_order(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    patient_id = world["patient"].patient_id
    elsewhere = handle(message("B1", world["mum_cbc"].accession_number, [HGB.format("3.0")], pid3=patient_id))
    unknown = handle(message("B1", "NO-SUCH-ACCESSION", [HGB.format("3.0")], pid3=patient_id))
    assert (elsewhere.code, elsewhere.errors) == ("AE", [("204", "OBR^1^2")])
    assert elsewhere.without_header == unknown.without_header
    # By order number and test too (ORC-4 / OBR-4), the other branch's order is not found.
    by_number = message("B2", world["mum_order"].order_number, [HGB.format("3.0")], pid3=patient_id)
    assert handle(by_number).without_header.replace("B2", "B1") == unknown.without_header
    assert LabResult.objects.count() == 0
    assert Hl7ReceivedMessage.objects.count() == 0
    assert _critical_events() == 0


def test_a_resend_with_a_new_timestamp_gets_the_stored_ack_and_is_not_applied_again(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    accession, patient_id = world["items"]["CBC"].accession_number, world["patient"].patient_id
    sent, resent = (timezone.now() + timedelta(seconds=s) for s in (1, 90))
    first = handle(message("R1", accession, [HGB.format("3.0")], pid3=patient_id, msh7=f"{sent:%Y%m%d%H%M%S+0000}"))
    again = handle(message("R1", accession, [HGB.format("3.0")], pid3=patient_id, msh7=f"{resent:%Y%m%d%H%M%S+0000}"))
    assert first.code == "AA"
    assert again.text == first.text  # the stored ACK, byte for byte
    assert LabResult.objects.count() == 1
    assert _critical_events() == 1


def test_the_same_control_id_with_other_content_is_ar_control_id_reused_never_aa(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    accession, patient_id = world["items"]["CBC"].accession_number, world["patient"].patient_id
    assert handle(message("R2", accession, [HGB.format("13.0")], pid3=patient_id)).code == "AA"
    other = handle(message("R2", accession, [HGB.format("3.0")], pid3=patient_id))
    assert (other.code, other.control_id, other.errors) == ("AR", "R2", [("205", "MSH^1^10")])
    assert "control id reused" in other.text.split("\rMSA|", 1)[1].split("\r")[0]
    assert [str(r.value_quantity) for r in LabResult.objects.all()] == ["13.0000"]
    assert _critical_events() == 0
    assert Hl7ReceivedMessage.objects.count() == 1


def _from_threads(texts: list[str]) -> list[Any]:
    """Each text handled by its own thread on its own database connection, all released at once."""
    barrier = threading.Barrier(len(texts))

    def one(text: str) -> Any:
        try:
            barrier.wait()
            return handle(text)
        finally:
            connection.close()

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, texts))


def test_two_copies_at_once_on_two_connections_are_applied_once(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    text = message("C1", world["items"]["CBC"].accession_number, [HGB.format("3.0")], pid3=world["patient"].patient_id)
    first, second = _from_threads([text, text])
    assert first.text == second.text
    assert first.code == "AA"
    assert LabResult.objects.count() == 1
    assert Hl7ReceivedMessage.objects.count() == 1
    assert _critical_events() == 1


def test_two_different_messages_under_one_key_at_once_apply_one_and_refuse_the_other(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    accession, patient_id = world["items"]["CBC"].accession_number, world["patient"].patient_id
    acks = _from_threads([message("C2", accession, [HGB.format(v)], pid3=patient_id) for v in ("13.0", "14.0")])
    assert sorted((a.code, a.errors) for a in acks) == [("AA", []), ("AR", [("205", "MSH^1^10")])]
    assert LabResult.objects.count() == 1


def test_a_message_without_pid_is_ae_101_and_applies_nothing(world: Any) -> None:
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    text = message("P1", world["items"]["CBC"].accession_number, [HGB.format("3.0")], pid3="", pid=False)
    ack = handle(text)
    assert (ack.code, ack.errors) == ("AE", [("101", "PID^1^3")])
    assert LabResult.objects.count() == 0
    assert _critical_events() == 0
    assert Hl7ReceivedMessage.objects.count() == 0


def test_pid3_names_the_patient_in_any_repetition_by_our_id_or_the_abha_number(world: Any) -> None:
    patient = world["patient"]
    patient.national_health_id = "91123456789012"
    patient.save(update_fields=["national_health_id"])
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    accession = world["items"]["CBC"].accession_number
    forms = [
        f"LAB-77812^^^CITYLAB^MR~{patient.patient_id}^^^CLINIC^PI",
        f"LAB-77812^^^CITYLAB^MR~{patient.patient_id}",
        "LAB-77812^^^CITYLAB^MR~91-1234-5678-9012^^^ABHA^NH",
        "91123456789012^^^NDHM&https://healthid.ndhm.gov.in&URI^NH",
        "91123456789012^^^&https://healthid.ndhm.gov.in&URI^NH",
    ]
    for number, pid3 in enumerate(forms):
        ack = handle(message(f"ID{number}", accession, [HGB.format("13.0")], pid3=pid3, test="CBC^CBC^L"))
        assert (pid3, ack.code) == (pid3, "AE" if number else "AA")
        # The first applied a final result; the rest reach the same check (the final is there), not PID's.
        assert ack.errors in ([], [("103", "OBX^1^11")])


@pytest.mark.parametrize(
    "pid3",
    [
        "LAB-77812^^^CITYLAB^MR",
        "91123456789012^^^CITYLAB^MR",  # the ABHA number under another authority
        "{patient_id}^^^ABHA^NH",  # our id presented as an ABHA number
        "PAT-999999^^^CLINIC^PI~91000000000000^^^ABHA^NH",
    ],
)
def test_pid3_naming_no_repetition_of_the_orders_patient_is_ae_204(world: Any, pid3: str) -> None:
    patient = world["patient"]
    patient.national_health_id = "91123456789012"
    patient.save(update_fields=["national_health_id"])
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    text = message(
        "ID9",
        world["items"]["CBC"].accession_number,
        [HGB.format("3.0")],
        pid3=pid3.format(patient_id=patient.patient_id),
    )
    ack = handle(text)
    assert (ack.code, ack.errors) == ("AE", [("204", "PID^1^3")])
    assert LabResult.objects.count() == 0
    assert _critical_events() == 0

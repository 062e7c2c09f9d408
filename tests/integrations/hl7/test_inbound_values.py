"""Real laboratory messages read as they are written (docs/hl7-inbound.md): OBX-3 with LOINC first and our
code as the alternate, or our code in any case; NM, SN, ST, TX, FT, CE and CWE values; the laboratory's own
OBX-7 range and OBX-8 flag kept beside ours; MSH-18 honoured (a Latin-1 message sent as Latin-1 bytes by the
`hl7` package's MLLP client)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import hl7
import pytest
from django.utils import timezone
from hl7.client import MLLPClient

from integrations.hl7.models import Hl7ReceivedMessage
from integrations.webhooks.models import WebhookEvent
from lab import services
from lab.models import LabResult, Priority, ValueType
from tests.integrations.hl7.inbound_support import handle, message, read_ack, sender
from tests.integrations.hl7.support import ListenerThread, lab_world
from tests.lab.order_factories import AnalyteFactory, LabTestFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world() -> dict[str, Any]:
    world = lab_world()
    world["sender"] = sender("City lab", ["10.1.0.0/16", "127.0.0.1/32"], [world["blr"]])
    return world


def _hgb(world: Any) -> LabResult:
    return LabResult.objects.get(item=world["items"]["CBC"], analyte__code="HGB")


@pytest.mark.parametrize(
    "obx3",
    [
        "718-7^Hemoglobin^LN",
        "718-7^Hemoglobin^LN^HGB^Haemoglobin^L",
        "L-0042^Hb^99CITY^718-7^Hemoglobin^LN",
        "hgb",
        "Hgb^Haemoglobin^L",
        "XYZ^Hb^99CITY^hgb^Hb^L",
    ],
)
def test_obx3_names_the_analyte_by_loinc_or_local_code_in_either_triplet(world: Any, obx3: str) -> None:
    text = message(
        "V1", world["items"]["CBC"].accession_number, [f"NM|{obx3}||13.2|g/dL|||||F"], pid3=world["patient"].patient_id
    )
    assert handle(text).code == "AA"
    assert str(_hgb(world).value_quantity) == "13.2000"


def test_obx3_naming_two_analytes_or_none_is_ae_204_naming_them(world: Any) -> None:
    accession, patient_id = world["items"]["CBC"].accession_number, world["patient"].patient_id
    two = handle(message("V2", accession, ["NM|HGB^Hb^L^777-3^Platelets^LN||13|g/dL|||||F"], pid3=patient_id))
    assert (two.code, two.errors) == ("AE", [("204", "OBX^1^3")])
    assert two.err_texts == ["OBX-3 names more than one analyte of CBC: HGB, PLT."]
    none = handle(message("V3", accession, ["NM|2345-7^Glucose^LN||5.1|mmol/L|||||F"], pid3=patient_id))
    assert (none.code, none.errors) == ("AE", [("204", "OBX^1^3")])
    assert LabResult.objects.count() == 0


@pytest.mark.parametrize(
    ("sn", "stored", "flag"),
    [
        ("^15.7", ("", "15.7000", None), "H"),
        ("=^13", ("", "13.0000", None), "N"),
        (">^16", (">", "16.0000", None), "H"),  # every value above 16 is above the high (15.5)
        (">^14", (">", "14.0000", None), ""),  # 14.5 would be N, 16 H: inconclusive
        (">=^20.5", (">=", "20.5000", None), "HH"),  # past the critical high (20)
        ("<^0.5", ("<", "0.5000", None), "LL"),  # below the critical low (7)
        ("<=^11", ("<=", "11.0000", None), "L"),
        ("<^13", ("<", "13.0000", None), ""),
        ("^10^-^20", ("", "10.0000", "20.0000"), ""),  # L at one end, H at the other
        ("^12.5^-^14", ("", "12.5000", "14.0000"), "N"),
    ],
)
def test_sn_values_are_kept_as_comparator_and_number_or_range_flagged_only_when_conclusive(
    world: Any, sn: str, stored: tuple[str, str, str | None], flag: str
) -> None:
    text = message(
        "SN1",
        world["items"]["CBC"].accession_number,
        [f"SN|718-7^Hemoglobin^LN^HGB^Haemoglobin^L||{sn}|g/dL^^UCUM|12.0-15.5||||F"],
        pid3=world["patient"].patient_id,
    )
    assert handle(text).code == "AA"
    result = _hgb(world)
    high = None if result.value_quantity_high is None else str(result.value_quantity_high)
    assert (result.comparator, str(result.value_quantity), high) == stored
    assert result.flag == flag
    critical = WebhookEvent.objects.filter(type="lab_result.critical").count()
    assert critical == (1 if flag in ("LL", "HH") else 0)


@pytest.mark.parametrize("sn", ["^1^:^128", "^1^/^64", "^2^+", "<>^5", ">^10^-^20"])
def test_an_sn_that_is_no_quantity_is_ae_102_on_a_quantity_analyte(world: Any, sn: str) -> None:
    text = message(
        "SN2", world["items"]["CBC"].accession_number, [f"SN|HGB||{sn}|g/dL|||||F"], pid3=world["patient"].patient_id
    )
    ack = handle(text)
    assert (ack.code, ack.errors) == ("AE", [("102", "OBX^1^5")])
    if ":" in sn:
        assert ack.err_texts == [
            "SN 1:128 is a ratio; HGB is a quantity: send a number, a comparator and a number (>14) or a range (10-20)."
        ]
    assert LabResult.objects.count() == 0


def _urine_world(world: Any) -> dict[str, Any]:
    """A urine test with a coded nitrite and a text titre at BLR, collected."""
    urine = LabTestFactory(code="UR", name="Urine", loinc_code="24356-8")
    AnalyteFactory(
        test=urine,
        code="NIT",
        loinc_code="5802-4",
        unit="",
        value_type=ValueType.CODED,
        coded_values=["Positive", "Negative"],
        critical_low=None,
        critical_high=None,
    )
    AnalyteFactory(
        test=urine,
        code="TITRE",
        loinc_code="5000-1",
        unit="",
        value_type=ValueType.TEXT,
        critical_low=None,
        critical_high=None,
    )
    order = services.lab_order_create(
        branch=world["blr"],
        patient=world["patient"],
        doctor=world["doctor"],
        tests=[urine],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )
    services.lab_order_collect(order=order)
    return {"item": order.items.get()}


@pytest.mark.parametrize(
    "cwe", ["POS^Positive^L", "positive", "10828004^Positive^SCT", "X^^99CITY^POS^Positive^L", "^POSITIVE"]
)
def test_cwe_matches_a_coded_analyte_by_code_or_text_in_either_triplet(world: Any, cwe: str) -> None:
    urine = _urine_world(world)
    obx = [f"CWE|5802-4^Nitrite^LN||{cwe}||||||F", "SN|5000-1^Titre^LN||^1^:^128||||||F"]
    ack = handle(message("CW1", urine["item"].accession_number, obx, pid3=world["patient"].patient_id, test="UR"))
    assert ack.code == "AA"
    values = dict(LabResult.objects.filter(item=urine["item"]).values_list("analyte__code", "value_text"))
    assert values == {"NIT": "Positive", "TITRE": "1:128"}  # a ratio on a text analyte is kept as written


def test_a_cwe_naming_no_coded_value_is_ae_102(world: Any) -> None:
    urine = _urine_world(world)
    obx = ["CWE|5802-4^Nitrite^LN||TRACE^Trace^L||||||F"]
    ack = handle(message("CW2", urine["item"].accession_number, obx, pid3=world["patient"].patient_id, test="UR"))
    assert (ack.code, ack.errors) == ("AE", [("102", "OBX^1^5")])


def test_ft_and_tx_reports_are_stored_with_their_escapes_read(world: Any) -> None:
    xray = world["items"]["XR-CHEST"].accession_number
    ft = r"FT|18782-3^Radiology study observation^LN||IMPRESSION:\.br\No consolidation \T\ no effusion.\.sp2\Heart\F\size normal.||||||F"
    ack = handle(message("FT1", xray, [ft], pid3=world["patient"].patient_id, test="XR-CHEST"))
    assert ack.code == "AA"
    report = LabResult.objects.get(item__accession_number=xray)
    assert report.value_text == "IMPRESSION:\nNo consolidation & no effusion.\n\nHeart|size normal."


def test_obx7_and_obx8_are_kept_as_sent_beside_our_own_flag_and_range(world: Any) -> None:
    obx = [
        "NM|718-7^Hemoglobin^LN^HGB^Haemoglobin^L||15.9|g/dL^^UCUM|11.5-16.0 g/dL|N|||F",
        r"NM|777-3^Platelets^LN^PLT^Platelets^L||120|10*3/uL^^UCUM|\S\150|L~A|||F",
    ]
    ack = handle(message("RR1", world["items"]["CBC"].accession_number, obx, pid3=world["patient"].patient_id))
    assert ack.code == "AA"
    rows = LabResult.objects.order_by("analyte__position").values_list(
        "analyte__code", "flag", "reference_low", "reference_high", "reported_range", "reported_flag"
    )
    assert list(rows) == [
        ("HGB", "H", Decimal("12.0000"), Decimal("15.5000"), "11.5-16.0 g/dL", "N"),
        ("PLT", "L", Decimal("150.0000"), Decimal("450.0000"), "^150", "L~A"),
    ]


def test_a_public_style_oru_over_mllp_with_loinc_first_sn_and_several_pid3_is_applied(
    world: Any, settings: Any
) -> None:
    settings.HL7_LISTENER_READ_TIMEOUT_SECONDS = 2
    patient = world["patient"]
    india = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    sent, collected, observed, reported = (
        f"{timezone.now().astimezone(india) - datetime.timedelta(minutes=m):%Y%m%d%H%M%S%z}" for m in (0, 3, 2, 1)
    )
    text = "\r".join(
        [
            "MSH|^~\\&|CITYLIS^2.16.840.1.113883.3.72.5.20^ISO|CITYLAB^2.16.840.1.113883.3.72.5.21^ISO|CLINIC|BLR|"
            f"{sent}||ORU^R01^ORU_R01|NIST-LRI-{patient.pk.hex[:8]}|P|2.5.1|||AL|NE|||||LRI_Common_Component^^2.16.840.1.113883.9.16^ISO",
            f"PID|1||CL-99812^^^CITYLAB&2.16.840.1.113883.3.72.5.30.2&ISO^MR~{patient.patient_id}^^^CLINIC&&L^PI||Rao^Asha^^^^^L||19960101|F",
            f"ORC|RE|{world['items']['CBC'].accession_number}^CLINIC|CL-44^CITYLAB|||||||||1234^Menon^K",
            f"OBR|1|{world['items']['CBC'].accession_number}^CLINIC|CL-44^CITYLAB|58410-2^CBC panel - Blood by Automated count^LN^CBC^Complete blood count^L|||{collected}|||||||||||||||{reported}|||F",
            f"OBX|1|NM|718-7^Hemoglobin [Mass/volume] in Blood^LN^HGB^Haemoglobin^L||13.4|g/dL^grams per deciliter^UCUM|12.0-15.5|N|||F|||{observed}",
            f"OBX|2|SN|777-3^Platelets [#/volume] in Blood by Automated count^LN^PLT^Platelets^L||>^1000|10*3/uL^thousand per microliter^UCUM|150-450|HH|||F|||{observed}",
            "NTE|1||Verified by repeat analysis.",
        ]
    )
    running = ListenerThread().start()
    try:
        with MLLPClient("127.0.0.1", running.port) as client:
            ack = read_ack(str(hl7.parse(client.send_message(text + "\r"))))
    finally:
        running.stop()
    assert (ack.code, ack.errors) == ("AA", [])
    rows = LabResult.objects.order_by("analyte__position").values_list(
        "analyte__code", "comparator", "value_quantity", "flag", "reported_range", "reported_flag", "note"
    )
    assert list(rows) == [
        ("HGB", "", Decimal("13.4000"), "N", "12.0-15.5", "N", ""),
        ("PLT", ">", Decimal("1000.0000"), "HH", "150-450", "HH", "Verified by repeat analysis."),
    ]
    assert WebhookEvent.objects.filter(type="lab_result.critical").count() == 1


LATIN1_REPORT = (
    "FT|18782-3^Radiology study observation^LN||Befund: Zwerchfell glatt, Herzgröße normal; Dr. Müller (Ärztin)||||||F"
)


def test_a_latin1_message_marked_8859_1_is_read_as_latin1_over_mllp(world: Any, settings: Any) -> None:
    settings.HL7_LISTENER_READ_TIMEOUT_SECONDS = 2
    xray = world["items"]["XR-CHEST"].accession_number
    text = message("L1", xray, [LATIN1_REPORT], pid3=world["patient"].patient_id, charset="8859/1", test="XR-CHEST")
    running = ListenerThread().start()
    try:
        with MLLPClient("127.0.0.1", running.port, encoding="latin-1") as client:
            ack = read_ack(str(hl7.parse(client.send_message(text))))
    finally:
        running.stop()
    assert (ack.code, ack.errors) == ("AA", [])
    stored = LabResult.objects.get(item__accession_number=xray).value_text
    assert stored == "Befund: Zwerchfell glatt, Herzgröße normal; Dr. Müller (Ärztin)"
    assert "\ufffd" not in stored


def test_latin1_bytes_declared_utf8_are_ar_102_at_msh18_and_nothing_is_stored(world: Any) -> None:
    xray = world["items"]["XR-CHEST"].accession_number
    text = message(
        "L2", xray, [LATIN1_REPORT], pid3=world["patient"].patient_id, charset="UNICODE UTF-8", test="XR-CHEST"
    )
    ack = handle(text.encode("latin-1"))
    assert (ack.code, ack.control_id, ack.errors) == ("AR", "L2", [("102", "MSH^1^18")])
    assert ack.err_texts[0].startswith("The message is not UNICODE UTF-8: byte 0xF6 at offset ")
    assert LabResult.objects.count() == 0
    assert Hl7ReceivedMessage.objects.count() == 0


def test_without_msh18_the_senders_default_charset_reads_the_message(world: Any) -> None:
    xray = world["items"]["XR-CHEST"].accession_number
    text = message("L3", xray, [LATIN1_REPORT], pid3=world["patient"].patient_id, test="XR-CHEST").encode("latin-1")
    assert handle(text).errors == [("102", "MSH^1^18")]  # the default is UTF-8
    world["sender"].default_charset = "8859/1"
    world["sender"].save(update_fields=["default_charset"])
    assert handle(text).code == "AA"
    assert "Herzgröße" in LabResult.objects.get(item__accession_number=xray).value_text


@pytest.mark.parametrize(("declared", "encoding"), [("UNICODE", "utf-8"), ("UTF-8", "utf-8"), ("ASCII", "ascii")])
def test_other_msh18_spellings_are_read(world: Any, declared: str, encoding: str) -> None:
    xray = world["items"]["XR-CHEST"].accession_number
    report = LATIN1_REPORT if encoding != "ascii" else "TX|18782-3^Report^LN||No consolidation.||||||F"
    text = message("L4", xray, [report], pid3=world["patient"].patient_id, charset=declared, test="XR-CHEST")
    assert handle(text.encode(encoding)).code == "AA"


def test_an_unknown_msh18_is_ar_103(world: Any) -> None:
    xray = world["items"]["XR-CHEST"].accession_number
    text = message("L5", xray, [LATIN1_REPORT], pid3=world["patient"].patient_id, charset="ISO IR87", test="XR-CHEST")
    ack = handle(text.encode("latin-1"))
    assert (ack.code, ack.errors) == ("AR", [("103", "MSH^1^18")])
    assert LabResult.objects.count() == 0

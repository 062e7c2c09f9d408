"""Outbound HL7 v2.5.1 fields as docs/hl7-outbound.md fixes them, read back with implementations nobody here
wrote: hl7apy (its 2.5.1 segment definitions name the fields: `aip.aip_6` is START_DATE_TIME) and python-hl7
(the receiver on the wire). Names are non-ASCII, the doctor carries a title, the patient an e-mail address."""

from __future__ import annotations

from typing import Any

import hl7
import pytest
from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.parser import parse_segment

from appointments import events as appointment_events
from appointments.models import Appointment
from integrations.hl7 import outbox
from integrations.hl7.kinds import MESSAGE_KINDS
from integrations.hl7.messages import PersonName, message_build, person_name
from integrations.hl7.models import Hl7Destination, Hl7Message
from lab import services
from lab.models import LabOrder, study_instance_uid
from patients import events as patient_events
from tests.appointments.factories import AppointmentFactory
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.integrations.hl7.support import Receiver, hl7apy_validate_with_z, zds_validate
from tests.integrations.hl7.test_outbound import destination, no_broker
from tests.lab.order_factories import LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory

__all__ = ["no_broker"]

pytestmark = pytest.mark.django_db(transaction=True)

APPLICATION = "CLINIC"


class Utf8Receiver(Receiver):
    """The `hl7` package's receiver decoding strictly as UTF-8 (its default is ASCII): a frame that is not
    UTF-8 closes the connection without an ACK, so every acknowledged message was UTF-8 on the wire."""

    async def _handle(self, reader: Any, writer: Any) -> None:
        reader.encoding = writer.encoding = "utf-8"
        await super()._handle(reader, writer)


def world() -> dict[str, Any]:
    blr = BranchFactory(code="BLR", state="Karnataka", time_zone="Asia/Kolkata")
    patient = PatientFactory(registration_branch=blr, first_name="Ananyā", last_name="Śarmā", email="ananya@example.in")
    doctor = DoctorFactory(name="Dr. Asha Rao", department=DepartmentFactory(name="Cardiology"))
    doctor.branches.add(blr)
    cbc = LabTestFactory(code="CBC", name="Complete blood count", loinc_code="58410-2")
    ct = imaging_test(code="CT-HEAD", name="CT head without contrast", modality="CT", loinc_code="30799-1")
    return {"blr": blr, "patient": patient, "doctor": doctor, "cbc": cbc, "ct": ct}


def _appointment(w: dict[str, Any]) -> Appointment:
    made = AppointmentFactory(branch=w["blr"], patient=w["patient"], doctor=w["doctor"])
    return Appointment.objects.select_related("patient", "doctor__department", "branch").get(pk=made.pk)


def _order(w: dict[str, Any], *tests: Any, notes: str = "") -> LabOrder:
    return services.lab_order_create(
        branch=w["blr"],
        patient=w["patient"],
        doctor=w["doctor"],
        tests=list(tests),
        priority="routine",
        ordered_by="test",
        clinical_notes=notes,
    )


def publish(w: dict[str, Any], event_type: str, variant: str = "") -> None:
    """One event of `event_type` through the domain code that publishes it (`variant`: lab or imaging)."""
    if event_type.startswith("patient."):
        patient_events.publish(event_type, w["patient"])
    elif event_type.startswith("appointment."):
        appointment_events.publish(event_type, _appointment(w))
    else:
        order = _order(w, w["cbc"] if variant == "lab" else w["ct"], notes="Fièvre — 5 days")
        if event_type == "lab_order.cancelled":
            services.lab_order_cancel(order=order, reason="ordered twice")


def built(lis: Hl7Destination, event_type: str) -> list[str]:
    """The ER7 text of every message written for `event_type` to `lis`, as the drain would send it."""
    return [
        message_build(
            event_type=m.event.type,
            payload=m.event.payload,
            destination=lis,
            control_id=m.control_id,
            created_at=m.event.created_at,
        )
        for m in Hl7Message.objects.filter(destination=lis, event__type=event_type).select_related("event")
    ]


def segments(text: str, name: str) -> list[str]:
    return [line for line in text.split("\r") if line.startswith(name + "|")]


def field(line: str, name: str) -> str:
    """One field of a segment as hl7apy's 2.5.1 definition names it (`aip_6`), in ER7 (its first
    repetition)."""
    parsed = parse_segment(line, version="2.5.1", validation_level=VALIDATION_LEVEL.STRICT)
    return str(getattr(parsed, name).to_er7())


# --- Names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("full", "expected"),
    [
        ("Dr. Asha Rao", PersonName("Rao", "Asha", prefix="Dr")),
        ("dr asha rao", PersonName("rao", "asha", prefix="Dr")),
        ("DR.Asha Rao", PersonName("Rao", "Asha", prefix="Dr")),
        ("Prof. Anil Kumar Rao", PersonName("Rao", "Anil", "Kumar", prefix="Prof")),
        ("Mr. Anil Rao", PersonName("Rao", "Anil", prefix="Mr")),
        ("MRS Lakshmi Iyer", PersonName("Iyer", "Lakshmi", prefix="Mrs")),
        ("ms. Priya Nair", PersonName("Nair", "Priya", prefix="Ms")),
        ("Prof. Dr. Ravi Menon", PersonName("Menon", "Ravi", prefix="Prof Dr")),
        ("Drishti Rao", PersonName("Rao", "Drishti")),  # a name that starts like a title is a name
        ("Msafiri Otieno", PersonName("Otieno", "Msafiri")),
        ("Dr. Rao", PersonName("Rao", "", prefix="Dr")),
        ("Rao", PersonName("Rao", "")),
    ],
)
def test_titles_go_to_the_prefix_component_never_into_the_given_name(full: str, expected: PersonName) -> None:
    assert person_name(full) == expected


def test_every_xcn_carries_the_doctor_without_the_title_in_the_given_name() -> None:
    w = world()
    lis = destination(1, sending_application=APPLICATION)
    publish(w, "appointment.booked")
    _order(w, w["cbc"])
    doctor = str(w["doctor"].id)
    xcn = f"{doctor}^Rao^Asha^^^Dr"

    (siu,) = built(lis, "appointment.booked")
    (orm,) = built(lis, "lab_order.created")

    assert field(segments(siu, "SCH")[0], "sch_16") == xcn
    assert field(segments(siu, "AIP")[0], "aip_3") == xcn
    assert field(segments(orm, "ORC")[0], "orc_12") == xcn
    assert field(segments(orm, "OBR")[0], "obr_16") == xcn
    assert field(segments(siu, "PID")[0], "pid_5") == "Śarmā^Ananyā"


# --- SIU ---------------------------------------------------------------------------------------------------


def test_siu_aip_carries_the_start_in_aip_6_the_duration_in_aip_9_and_its_units_in_aip_10() -> None:
    w = world()
    lis = destination(1)
    appointment = _appointment(w)
    appointment_events.publish("appointment.booked", appointment)
    start = appointment.slot_start.astimezone(w["blr"].zone).strftime("%Y%m%d%H%M%S%z")
    end = appointment.slot_end.astimezone(w["blr"].zone).strftime("%Y%m%d%H%M%S%z")

    (siu,) = built(lis, "appointment.booked")

    (aip,) = segments(siu, "AIP")
    assert field(aip, "aip_4") == "Cardiology"
    assert field(aip, "aip_5") == ""  # resource group
    assert field(aip, "aip_6") == start  # START_DATE_TIME
    assert field(aip, "aip_7") == field(aip, "aip_8") == ""  # start offset and its units
    assert field(aip, "aip_9") == "15"  # DURATION
    assert field(aip, "aip_10") == "min"  # DURATION_UNITS
    (sch,) = segments(siu, "SCH")
    assert field(sch, "sch_11") == f"^^15^{start}^{end}"  # as before: TQ duration, start, end
    assert (field(sch, "sch_9"), field(sch, "sch_10")) == ("15", "min")


# --- ORM ---------------------------------------------------------------------------------------------------


def test_orm_obr_4_carries_the_local_code_first_and_loinc_as_the_alternate() -> None:
    w = world()
    lis = destination(1)
    _order(w, w["cbc"], w["ct"])

    (orm,) = built(lis, "lab_order.created")

    assert [field(obr, "obr_4") for obr in segments(orm, "OBR")] == [
        "CBC^Complete blood count^L^58410-2^Complete blood count^LN",
        "CT-HEAD^CT head without contrast^L^30799-1^CT head without contrast^LN",
    ]


def test_the_order_payload_carries_each_tests_loinc_and_an_imaging_items_study_instance_uid() -> None:
    w = world()
    lis = destination(1)
    order = _order(w, w["cbc"], w["ct"])
    cbc_item, ct_item = order.items.order_by("position")

    (message,) = Hl7Message.objects.filter(destination=lis)

    items = message.event.payload["order"]["items"]
    assert [(i["test"]["code"], i["test"]["loinc_code"], i["modality"], i["study_instance_uid"]) for i in items] == [
        ("CBC", "58410-2", None, None),
        ("CT-HEAD", "30799-1", "CT", study_instance_uid(ct_item.id)),
    ]
    assert cbc_item.accession_number == items[0]["accession_number"]


def test_an_imaging_orm_carries_the_modality_in_obr_24_and_the_study_instance_uid_in_zds() -> None:
    w = world()
    lis = destination(1, sending_application=APPLICATION)
    order = _order(w, w["cbc"], w["ct"], notes="Headache")
    ct_item = order.items.get(test=w["ct"])

    (orm,) = built(lis, "lab_order.created")

    assert [line[:3] for line in orm.split("\r") if line] == [
        "MSH",
        "PID",
        "ORC",
        "OBR",
        "NTE",
        "ORC",
        "OBR",
        "NTE",
        "ZDS",  # after the imaging item's OBR and NTE; none for the lab item
    ]
    cbc_obr, ct_obr = segments(orm, "OBR")
    assert (field(cbc_obr, "obr_24"), field(ct_obr, "obr_24")) == ("LAB", "CT")
    (zds,) = segments(orm, "ZDS")
    assert zds == f"ZDS|{study_instance_uid(ct_item.id)}^{APPLICATION}^Application^DICOM"
    assert zds_validate(zds, application=APPLICATION) == study_instance_uid(ct_item.id)
    assert hl7apy_validate_with_z(orm) == [zds]


def test_an_imaging_cancellation_names_the_same_study_instance_uid() -> None:
    w = world()
    lis = destination(1)
    order = _order(w, w["ct"])
    services.lab_order_cancel(order=order, reason="patient left")
    (item,) = order.items.all()

    (cancel,) = built(lis, "lab_order.cancelled")

    assert field(segments(cancel, "ORC")[0], "orc_1") == "CA"
    assert segments(cancel, "ZDS") == [f"ZDS|{study_instance_uid(item.id)}^CLINIC^Application^DICOM"]


def test_an_order_written_before_the_payload_carried_loinc_and_the_uid_is_still_sent() -> None:
    w = world()
    lis = destination(1)
    _order(w, w["ct"])
    (message,) = Hl7Message.objects.filter(destination=lis).select_related("event")
    payload = message.event.payload
    for item in payload["order"]["items"]:
        del item["test"]["loinc_code"], item["study_instance_uid"]

    text = message_build(
        event_type="lab_order.created",
        payload=payload,
        destination=lis,
        control_id="C1",
        created_at=message.event.created_at,
    )

    (obr,) = segments(text, "OBR")
    assert field(obr, "obr_4") == "CT-HEAD^CT head without contrast^L"
    assert field(obr, "obr_24") == "CT"
    assert segments(text, "ZDS") == []
    hl7apy_validate_with_z(text)


# --- ADT ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", ["patient.registered", "patient.updated"])
def test_adt_pid_13_carries_the_phone_and_the_email_as_two_repetitions(event_type: str) -> None:
    w = world()
    lis = destination(1)
    publish(w, event_type)
    phone = w["patient"].phone

    (adt,) = built(lis, event_type)

    (pid,) = segments(adt, "PID")
    assert pid.split("|")[13] == f"^PRN^PH^^^^^^^^^{phone}~^NET^Internet^ananya@example.in"
    parsed = parse_segment(pid, version="2.5.1", validation_level=VALIDATION_LEVEL.STRICT)
    phone_xtn, email_xtn = parsed.pid_13
    assert (email_xtn.xtn_2.to_er7(), email_xtn.xtn_3.to_er7(), email_xtn.xtn_4.to_er7()) == (
        "NET",
        "Internet",
        "ananya@example.in",
    )
    assert phone_xtn.xtn_12.to_er7() == phone


def test_a_patient_without_email_gets_the_phone_alone() -> None:
    w = world()
    w["patient"].email = ""
    w["patient"].save(update_fields=["email"])
    lis = destination(1)
    publish(w, "patient.updated")

    (adt,) = built(lis, "patient.updated")

    assert segments(adt, "PID")[0].split("|")[13] == f"^PRN^PH^^^^^^^^^{w['patient'].phone}"


# --- MSH-18 and the wire -----------------------------------------------------------------------------------

NAMES = [
    ("Ananyā", "Śarmā"),
    ("अनन्या", "शर्मा"),
    ("ಅನನ್ಯ", "ರಾವ್"),
    ("அனன்யா", "ஐயர்"),
    ("Zoë", "Müller"),
    ("José", "Núñez"),
    ("Łukasz", "Żółć"),
    ("Søren", "Kierkegård"),
    ("Chloé", "D'Souza"),
    ("Björn", "Ångström"),
    ("ਹਰਪ੍ਰੀਤ", "ਸਿੰਘ"),
    ("অনন্যা", "সেন"),
    ("అనన్య", "రెడ్డి"),
    ("അനന്യ", "നായർ"),
    ("Ayşe", "Yılmaz"),  # noqa: RUF001 (a Turkish dotless i, on purpose)
    ("Ðorđe", "Petrović"),
    ("François", "Lefèvre"),
    ("Jürgen", "Groß"),
    ("Renée", "O'Brien"),
    ("Νίκος", "Παπαδόπουλος"),
]


def test_twenty_messages_with_utf8_names_declare_unicode_utf8_in_msh_18_and_are_utf8_on_the_wire() -> None:
    receiver = Utf8Receiver().start()
    try:
        lis = destination(receiver.port, events=["patient.registered"])
        blr = BranchFactory(code="BLR")
        for first, last in NAMES:
            patient_events.publish(
                "patient.registered", PatientFactory(registration_branch=blr, first_name=first, last_name=last)
            )

        result = outbox.destination_drain(destination_id=lis.pk)

        assert (result.acknowledged, result.retrying, result.failed) == (20, 0, 0)
        assert len(receiver.received) == 20
        for text, (first, last) in zip(receiver.received, NAMES, strict=True):
            message = hl7.parse(text)
            assert str(message.segment("MSH")(18)) == "UNICODE UTF-8"
            assert str(message.segment("PID")(5)) == f"{last}^{first}"
    finally:
        receiver.stop()


def test_an_ascii_only_message_leaves_msh_18_empty_which_hl7_reads_as_ascii() -> None:
    w = world()
    w["patient"].first_name, w["patient"].last_name = "Ananya", "Sharma"
    w["patient"].save(update_fields=["first_name", "last_name"])
    lis = destination(1)
    publish(w, "patient.registered")

    (adt,) = built(lis, "patient.registered")

    assert field(segments(adt, "MSH")[0], "msh_18") == ""
    assert adt.isascii()


def test_non_ascii_text_anywhere_in_the_message_declares_utf8() -> None:
    w = world()
    w["patient"].first_name, w["patient"].last_name = "Ananya", "Sharma"
    w["patient"].save(update_fields=["first_name", "last_name"])
    lis = destination(1)
    _order(w, w["cbc"], notes="Fièvre")  # only the note is non-ASCII

    (orm,) = built(lis, "lab_order.created")

    assert field(segments(orm, "MSH")[0], "msh_18") == "UNICODE UTF-8"


# --- Every kind, strictly ----------------------------------------------------------------------------------

KINDS = [
    ("patient.registered", ""),
    ("patient.updated", ""),
    ("appointment.booked", ""),
    ("appointment.rescheduled", ""),
    ("appointment.cancelled", ""),
    ("appointment.no_show", ""),
    ("lab_order.created", "lab"),
    ("lab_order.cancelled", "lab"),
    ("lab_order.created", "imaging"),
    ("lab_order.cancelled", "imaging"),
]


def test_the_strict_validation_below_covers_every_message_kind() -> None:
    assert {event_type for event_type, _ in KINDS} == set(MESSAGE_KINDS)


@pytest.mark.parametrize(("event_type", "variant"), KINDS)
def test_every_message_kind_passes_strict_hl7apy_2_5_1_validation(event_type: str, variant: str) -> None:
    """Non-ASCII names, a titled doctor and an e-mail address in every message; the standard part is
    validated strictly and the ZDS segment of an imaging order against its IHE definition (see
    support.hl7apy_validate_with_z for why the two are apart)."""
    w = world()
    lis = destination(1)
    publish(w, event_type, variant)

    (text,) = built(lis, event_type)[-1:]

    assert field(segments(text, "MSH")[0], "msh_18") == "UNICODE UTF-8"
    z_segments = hl7apy_validate_with_z(text)
    if variant == "imaging":
        (zds,) = z_segments
        (item,) = LabOrder.objects.get().items.all()
        assert zds_validate(zds, application="CLINIC") == study_instance_uid(item.id)
    else:
        assert z_segments == []
    if event_type.startswith("patient."):
        assert segments(text, "PID")[0].split("|")[13].endswith("~^NET^Internet^ananya@example.in")
    else:  # the doctor in SCH-16 and AIP-3, or ORC-12 and OBR-16
        fields = [f for line in text.split("\r") for f in line.split("|")]
        assert fields.count(f"{w['doctor'].id}^Rao^Asha^^^Dr") == 2

"""The outbound messages (docs/hl7-outbound.md), built from the event's payload (the API representation the
webhooks carry), so an HL7 destination learns exactly what a webhook subscriber learns.

ADT^A04/A08 (structure ADT_A01) from `patient`; SIU^S12/S13/S15/S26 (SIU_S12) from `appointment`;
ORM^O01 (NW or CA per item) from `order`. Identifiers: PID-3 is the clinic's patient id (type MR,
assigning authority the sending facility); an item's placer order number (ORC-2, OBR-2) is its accession
number, which is what an ORU must quote back; ORC-4 (placer group number) is the order number.

The fields real receivers read:
- OBR-4 is our catalogue code first (`^L`), LOINC as the alternate triplet (`^LN`): receivers that mapped
  our codes keep matching on OBR-4.1, and an interface engine (Mirth, HAPI) that maps on LOINC finds it in
  OBR-4.4 as the HL7 laboratory implementation guides place a standard code beside a local one.
- Imaging items name their DICOM modality in OBR-24 and their Study Instance UID in a ZDS segment after
  the OBR (and its NTE), as IHE Scheduled Workflow has the order placer do, so the worklist, the modality
  and the image manager share one UID.
- Person names: a title ("Dr.", "Prof.", ...) goes to the prefix component, never into the given name.
- MSH-18 declares `UNICODE UTF-8` when the message carries non-ASCII text (the bytes are always UTF-8);
  an ASCII-only message leaves it empty, which HL7 reads as ASCII, so receivers configured before this
  field was written see those messages unchanged.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, NamedTuple

from integrations.hl7 import er7
from integrations.hl7.kinds import MESSAGE_KINDS, MessageKind

VERSION = "2.5.1"
_GENDER = {"male": "M", "female": "F", "other": "O", "unknown": "U"}
_PRIORITY = {"routine": "R", "urgent": "A", "stat": "S"}
# SCH-25, filler status code (HL7 table 0278).
_SCH_STATUS = {"S12": "Booked", "S13": "Booked", "S15": "Cancelled", "S26": "Noshow"}
# MSH-18 (HL7 table 0211) of a message with non-ASCII text.
UTF8 = "UNICODE UTF-8"
# Leading titles moved to the name's prefix component, case-insensitive, with or without the dot.
_TITLE = re.compile(r"(?P<title>dr|prof|mrs|mr|ms)(?:\.\s*|\s+)", re.IGNORECASE)
_TITLES = {"dr": "Dr", "prof": "Prof", "mrs": "Mrs", "mr": "Mr", "ms": "Ms"}


class MessageBuildError(ValueError):
    """The event cannot be written as an HL7 message (an event kind without a message, a payload missing
    what the message requires)."""


def ts(value: str | datetime | None) -> str:
    """An ISO timestamp (or a date) as an HL7 DTM: 2026-11-26T10:30:00+05:30 -> 20261126103000+0530."""
    if value is None or value == "":
        return ""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    text = moment.strftime("%Y%m%d%H%M%S")
    return text + moment.strftime("%z") if moment.tzinfo else text


def _date(value: str | None) -> str:
    return value.replace("-", "") if value else ""


class PersonName(NamedTuple):
    """The XPN components 1-5 (XCN 2-6): what a display name such as "Dr. Asha Kumari Rao" is split into."""

    family: str
    given: str
    middle: str = ""  # second and further given names
    suffix: str = ""
    prefix: str = ""


def person_name(full: str, *, first: str = "", last: str = "") -> PersonName:
    """From one display name: leading titles to the prefix, the last word the family name, the first the
    given name and any between the further given names."""
    if first or last:
        return PersonName(family=last, given=first)
    rest, titles = (full or "").strip(), []
    while (match := _TITLE.match(rest)) and rest[match.end() :].strip():
        titles.append(_TITLES[match["title"].lower()])
        rest = rest[match.end() :].lstrip()
    words = rest.split()
    if not words:
        return PersonName(family="", given="", prefix=" ".join(titles))
    family = words[-1]
    given = words[0] if len(words) > 1 else ""
    return PersonName(family=family, given=given, middle=" ".join(words[1:-1]), prefix=" ".join(titles))


def _xpn(name: PersonName) -> list[str]:
    return list(name)


def _xcn(identifier: str, full: str) -> list[str]:
    return [identifier, *person_name(full)]


def _msh(destination: Any, kind: MessageKind, control_id: str, when: str, charset: str) -> str:
    return er7.msh(
        destination.sending_application,
        destination.sending_facility,
        destination.receiving_application,
        destination.receiving_facility,
        when,
        None,
        [kind.message_type, kind.trigger, kind.structure],
        control_id,
        "P",
        VERSION,
        None,
        None,
        None,
        None,
        None,
        charset,  # MSH-18
    )


def _pid_short(facility: str, patient_id: str, name: str) -> str:
    return er7.segment("PID", "1", None, [patient_id, "", "", facility, "MR"], None, _xpn(person_name(name)))


def _adt(destination: Any, kind: MessageKind, data: dict[str, Any], when: str) -> list[str]:
    patient = data["patient"]
    demographics = patient.get("demographics") or {}
    address = demographics.get("address") or {}
    contact = demographics.get("contact") or {}
    identifiers: list[str | list[str]] = [patient["patient_id"], "", "", destination.sending_facility, "MR"]
    # PID-13, one XTN repetition each: the phone (XTN-12 unformatted number) and the e-mail (XTN-4).
    telecoms = er7.Repeated(
        telecom
        for telecom in (
            ["", "PRN", "PH", "", "", "", "", "", "", "", "", contact["phone"]] if contact.get("phone") else None,
            ["", "NET", "Internet", contact["email"]] if contact.get("email") else None,
        )
        if telecom is not None
    )
    pid = er7.segment(
        "PID",
        "1",
        None,
        identifiers,
        None,
        _xpn(
            person_name(
                demographics.get("name", ""),
                first=demographics.get("first_name", ""),
                last=demographics.get("last_name", ""),
            )
        ),
        None,
        _date(demographics.get("date_of_birth")),
        _GENDER.get(demographics.get("gender") or "", "U"),
        None,
        None,
        # PID-11 address: street^^city^state^zip^country
        [
            address.get("line1") or "",
            "",
            address.get("city") or "",
            address.get("state") or "",
            address.get("pincode") or "",
            "IND",
        ]
        if address
        else None,
        None,
        telecoms or None,
    )
    return [
        er7.segment("EVN", None, when),
        pid,
        er7.segment("PV1", "1", "O"),
    ]


def _siu(destination: Any, kind: MessageKind, data: dict[str, Any], when: str) -> list[str]:
    appointment = data["appointment"]
    facility = destination.sending_facility
    start, end = ts(appointment["slot_start"]), ts(appointment["slot_end"])
    minutes = int(
        (
            datetime.fromisoformat(appointment["slot_end"]) - datetime.fromisoformat(appointment["slot_start"])
        ).total_seconds()
        // 60
    )
    doctor = appointment["doctor"]
    reason = appointment.get("visit_type") or ""
    sch = er7.segment(
        "SCH",
        [appointment["appointment_id"], destination.sending_application],  # SCH-1 placer appointment id
        [appointment["appointment_id"], destination.sending_application],  # SCH-2 filler appointment id
        None,
        None,
        None,
        [reason, reason],  # SCH-6 event reason
        [reason, reason],  # SCH-7 appointment reason
        None,
        str(minutes),  # SCH-9 duration
        "min",  # SCH-10 duration units
        ["", "", str(minutes), start, end],  # SCH-11 timing: start and end
        None,
        None,
        None,
        None,
        _xcn(doctor["id"], doctor["name"]),  # SCH-16 filler contact person
        None,
        None,
        None,
        [destination.sending_application],  # SCH-20 entered by person
        None,
        None,
        None,
        None,
        _SCH_STATUS[kind.trigger],  # SCH-25 filler status
    )
    return [
        sch,
        _pid_short(facility, appointment["patient_id"], appointment["patient"]["name"]),
        er7.segment("RGS", "1", "A"),
        er7.segment(
            "AIP",
            "1",
            None,
            _xcn(doctor["id"], doctor["name"]),  # AIP-3 personnel resource
            [doctor.get("department") or ""],  # AIP-4 resource type
            None,  # AIP-5 resource group
            start,  # AIP-6 start date/time
            None,  # AIP-7 start date/time offset
            None,  # AIP-8 its units
            str(minutes),  # AIP-9 duration
            "min",  # AIP-10 duration units
        ),
    ]


def _orm(destination: Any, kind: MessageKind, data: dict[str, Any], when: str) -> list[str]:
    order = data["order"]
    application = destination.sending_application
    segments = [_pid_short(destination.sending_facility, order["patient"]["patient_id"], order["patient"]["name"])]
    priority = _PRIORITY.get(order.get("priority") or "", "R")
    doctor = order["doctor"]
    provider = _xcn(doctor["id"], doctor["name"])
    items = [item for item in order["items"] if kind.order_control == "NW" or item["status"] == "cancelled"]
    if not items:
        raise MessageBuildError("The order has no item to send.")
    for number, item in enumerate(items, start=1):
        placer = [item["accession_number"], application]
        test = item["test"]
        service = [test["code"], test["name"], "L"]
        if test.get("loinc_code"):  # events written before the payload carried LOINC have none
            service += [test["loinc_code"], test["name"], "LN"]
        imaging = test.get("kind") == "imaging"
        segments.append(
            er7.segment(
                "ORC",
                kind.order_control,
                placer,  # ORC-2 placer order number
                None,
                [order["order_number"], application],  # ORC-4 placer group number
                "CA" if kind.order_control == "CA" else "SC",  # ORC-5 order status
                None,
                ["", "", "", "", "", priority],  # ORC-7 quantity/timing: priority
                None,
                when,  # ORC-9 date/time of transaction
                None,
                None,
                provider,  # ORC-12 ordering provider
            )
        )
        obr_fields: list[er7.Field] = [
            str(number),
            placer,  # OBR-2 placer order number
            None,
            service,  # OBR-4 universal service id
            None,
            ts(order["created_at"]),  # OBR-6 requested date/time
        ]
        obr_fields += [None] * (16 - len(obr_fields) - 1) + [provider]  # OBR-16 ordering provider
        obr_fields += [None, item["accession_number"], None, None, None, None, None]  # OBR-18 placer field 1
        # OBR-24 diagnostic service section: the DICOM modality for imaging (IHE Scheduled Workflow), else LAB.
        obr_fields += [(item.get("modality") or "RAD") if imaging else "LAB"]
        segments.append(er7.segment("OBR", *obr_fields))
        if order.get("clinical_notes") and kind.order_control == "NW":
            segments.append(er7.segment("NTE", "1", "P", order["clinical_notes"]))
        elif kind.order_control == "CA" and order.get("cancellation_reason"):
            segments.append(er7.segment("NTE", "1", "P", order["cancellation_reason"]))
        if imaging and item.get("study_instance_uid"):
            # ZDS-1 (RP): the Study Instance UID, the application that assigned it, its type and subtype.
            segments.append(er7.segment("ZDS", [item["study_instance_uid"], application, "Application", "DICOM"]))
    return segments


_BUILDERS = {"ADT": _adt, "SIU": _siu, "ORM": _orm}


def message_build(
    *, event_type: str, payload: dict[str, Any], destination: Any, control_id: str, created_at: datetime
) -> str:
    """The ER7 text of the message for this event to this destination."""
    kind = MESSAGE_KINDS.get(event_type)
    if kind is None:
        raise MessageBuildError(f"No HL7 message for {event_type} events.")
    when = ts(created_at)
    try:
        body = _BUILDERS[kind.message_type](destination, kind, payload, when)
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageBuildError(f"The {event_type} payload lacks what {kind.label} needs: {exc}") from None
    msh = _msh(destination, kind, control_id, when, "")
    if not (msh.isascii() and all(segment.isascii() for segment in body)):
        msh = _msh(destination, kind, control_id, when, UTF8)
    return er7.message([msh, *body])

"""What the inbound (ORU^R01) tests share: a world of two branches, registered senders, messages laid out as
public laboratory systems write them (LOINC first in OBX-3, SN values, several PID-3 repetitions) and the ACK
read back with the `hl7` package (an implementation of ER7 nobody here wrote)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import hl7
from django.utils import timezone

from clinic.models import Branch
from integrations.hl7 import inbound
from integrations.hl7.models import Hl7Sender
from lab import services
from lab.models import Priority
from tests.factories import BranchFactory
from tests.integrations.hl7.support import lab_world


def two_branch_world() -> dict[str, Any]:
    """lab_world's BLR (a collected CBC and chest X-ray order) and MUM with a collected CBC order of the same
    patient; no sender registered."""
    world = lab_world()
    mum = BranchFactory(code="MUM", state="Maharashtra", time_zone="Asia/Kolkata")
    world["doctor"].branches.add(mum)
    order = services.lab_order_create(
        branch=mum,
        patient=world["patient"],
        doctor=world["doctor"],
        tests=[world["cbc"]],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )
    services.lab_order_collect(order=order)
    world.update(mum=mum, mum_order=order, mum_cbc=order.items.get())
    return world


def sender(
    name: str,
    networks: list[str],
    branches: list[Branch],
    *,
    application: str = "",
    facility: str = "",
    charset: str = "UNICODE UTF-8",
) -> Hl7Sender:
    registered = Hl7Sender.objects.create(
        name=name,
        networks=networks,
        sending_application=application,
        sending_facility=facility,
        default_charset=charset,
    )
    registered.branches.set(branches)
    return registered


def message(
    control_id: str,
    accession: str,
    obx: list[str],
    *,
    pid3: str,
    application: str = "LIS",
    facility: str = "LAB",
    msh7: str | None = None,
    charset: str = "",
    test: str = "58410-2^CBC panel^LN^CBC^Complete blood count^L",
    pid: bool = True,
    observed: str = "",
) -> str:
    """An ORU^R01 as public laboratory samples lay it out; `obx` holds each OBX from OBX-2 on (its set id
    is added), e.g. `NM|718-7^Hemoglobin^LN^HGB^Haemoglobin^L||13.2|g/dL^^UCUM|12.0-15.5|N|||F`. Without OBR-7
    (`observed`) or OBX-14, the results were performed at MSH-7."""
    now = timezone.now().strftime("%Y%m%d%H%M%S+0000") if msh7 is None else msh7
    msh = f"MSH|^~\\&|{application}|{facility}|CLINIC|CLINIC|{now}||ORU^R01^ORU_R01|{control_id}|P|2.5.1"
    if charset:
        msh += f"||||||{charset}"
    lines = [msh]
    if pid:
        lines.append(f"PID|1||{pid3}||Rao^Asha^^^^^L||19960101|F")
    lines += [
        f"ORC|RE|{accession}^CLINIC|{accession}-F^CITYLAB",
        f"OBR|1|{accession}^CLINIC|{accession}-F^CITYLAB|{test}|||{observed}",
    ]
    lines += [f"OBX|{number}|{text}" for number, text in enumerate(obx, start=1)]
    return "\r".join(lines) + "\r"


@dataclass(frozen=True)
class Ack:
    text: str
    code: str
    control_id: str
    errors: list[tuple[str, str]]  # (ERR-3 code, ERR-2 location as sent: OBX^1^5)
    err_texts: list[str]

    @property
    def without_header(self) -> str:
        """The ACK but MSH (whose MSH-7 is the time it was built)."""
        return self.text.split("\r", 1)[1]


def read_ack(text: str) -> Ack:
    parsed = hl7.parse(text)
    errors, texts = [], []
    for err in parsed.segments("ERR") if "\rERR|" in text else []:
        errors.append((str(err(3)(1)(1)), str(err(2))))
        texts.append(str(err(8)))
    msa = parsed.segment("MSA")
    return Ack(text=text, code=str(msa(1)), control_id=str(msa(2)), errors=errors, err_texts=texts)


def handle(payload: str | bytes, peer: str = "10.1.0.5") -> Ack:
    """inbound.message_handle as the listener calls it, its ACK read back."""
    data = payload.encode() if isinstance(payload, str) else payload
    return read_ack(inbound.message_handle(data, peer=peer))

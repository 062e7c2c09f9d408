"""Registering HL7 senders (docs/hl7-inbound.md): `manage.py create_hl7_sender` and the admin, through the same
rules (a branch at least, an MSH-3/MSH-4 one sender's alone, ASCII), and the received messages' admin
showing the sender and the content digest."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from integrations.hl7.models import Hl7ReceivedMessage, Hl7Sender
from tests.factories import BranchFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_hl7_sender", *args, stdout=out)
    return out.getvalue()


def test_create_hl7_sender_registers_networks_branches_identity_and_charset_and_prints_json() -> None:
    BranchFactory(code="BLR")
    BranchFactory(code="MUM")
    out = run(
        "--name", "City lab", "--network", "10.1.2.3", "--network", "10.1.0.0/16", "--branch", "blr",
        "--branch", "MUM", "--sending-application", "LIS", "--sending-facility", "CITYLAB",
        "--default-charset", "8859/1", "--json",
    )  # fmt: skip
    sender = Hl7Sender.objects.get()
    assert json.loads(out) == {
        "id": str(sender.pk),
        "name": "City lab",
        "networks": ["10.1.2.3", "10.1.0.0/16"],
        "branches": ["BLR", "MUM"],
        "sending_application": "LIS",
        "sending_facility": "CITYLAB",
        "default_charset": "8859/1",
        "active": True,
    }
    assert sorted(sender.branches.values_list("code", flat=True)) == ["BLR", "MUM"]


def test_create_hl7_sender_without_identity_takes_any_and_says_so() -> None:
    BranchFactory(code="BLR")
    assert run("--name", "Lab", "--network", "127.0.0.1", "--branch", "BLR").splitlines()[1] == (
        "  from 127.0.0.1 as */*, for BLR"
    )
    assert Hl7Sender.objects.get().default_charset == "UNICODE UTF-8"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--branch", "XYZ"], "No branch with id or code 'XYZ'."),
        (["--branch", "BLR", "--network", "10.1.2.300"], "'10.1.2.300' is not an IP address or network"),
        (
            ["--branch", "BLR", "--sending-application", "lis", "--sending-facility", "citylab"],
            "registered to the sender 'City lab'",
        ),
        (["--branch", "BLR", "--sending-application", "LÄB"], "Use ASCII only"),
        (["--branch", "BLR", "--sending-application", "L|S"], "HL7 HD namespace id"),
    ],
)
def test_create_hl7_sender_refuses_and_creates_nothing(args: list[str], message: str) -> None:
    blr = BranchFactory(code="BLR")
    city = Hl7Sender.objects.create(
        name="City lab", networks=["10.1.0.0/16"], sending_application="LIS", sending_facility="CITYLAB"
    )
    city.branches.add(blr)
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace("|", r"\|")):
        run("--name", "Other", "--network", "10.2.0.0/16", *args)
    assert list(Hl7Sender.objects.values_list("name", flat=True)) == ["City lab"]


def test_the_admin_edits_a_senders_branches_identity_and_charset_and_refuses_a_taken_identity(
    admin_client: Any,
) -> None:
    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    city = Hl7Sender.objects.create(
        name="City lab", networks=["10.1.0.0/16"], sending_application="LIS", sending_facility="CITYLAB"
    )
    city.branches.add(blr)
    form = {
        "name": "Metro lab",
        "networks": "10.2.0.0/16",
        "branches": [str(mum.pk)],
        "sending_application": "LIS",
        "sending_facility": "METRO",
        "default_charset": "8859/1",
        "is_active": "on",
    }
    added = admin_client.post("/admin/integrations/hl7sender/add/", form)
    assert added.status_code == 302
    metro = Hl7Sender.objects.get(name="Metro lab")
    assert (metro.sending_facility, metro.default_charset, list(metro.branches.values_list("code", flat=True))) == (
        "METRO",
        "8859/1",
        ["MUM"],
    )
    taken = admin_client.post(
        f"/admin/integrations/hl7sender/{metro.pk}/change/", {**form, "sending_facility": "citylab"}
    )
    assert taken.status_code == 200
    assert "registered to the sender &#x27;City lab&#x27; already" in taken.content.decode()
    no_branch = admin_client.post(f"/admin/integrations/hl7sender/{metro.pk}/change/", {**form, "branches": []})
    assert no_branch.status_code == 200
    metro.refresh_from_db()
    assert (metro.sending_facility, list(metro.branches.values_list("code", flat=True))) == ("METRO", ["MUM"])
    listing = admin_client.get("/admin/integrations/hl7sender/").content.decode()
    assert "LIS/METRO" in listing
    assert "LIS/CITYLAB" in listing


def test_the_received_message_admin_shows_sender_and_digest(admin_client: Any) -> None:
    sender = Hl7Sender.objects.create(name="City lab", networks=["10.1.0.0/16"])
    received = Hl7ReceivedMessage.objects.create(
        sender=sender,
        content_sha256="ab" * 32,
        sending_application="LIS",
        sending_facility="LAB",
        control_id="M1",
        message_type="ORU^R01",
        ack="MSH|^~\\&|CLINIC\rMSA|AA|M1\r",
        peer="10.1.0.5",
        received_at="2026-11-28T00:00:00Z",
    )
    listing = admin_client.get("/admin/integrations/hl7receivedmessage/").content.decode()
    assert "City lab" in listing
    page = admin_client.get(f"/admin/integrations/hl7receivedmessage/{received.pk}/change/").content.decode()
    assert "ab" * 32 in page
    assert "City lab" in page

"""The calling AE allow-list: addresses and networks compared as the worklist sees its peers (an IPv4-mapped
IPv6 address is its IPv4 address), and the admin flagging entries accepted from any address."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.dicom.models import DicomCallingAE
from integrations.dicom.selectors import address_in_networks, calling_ae_allowed, peer_address
from tests.factories import BranchFactory


@pytest.mark.parametrize(
    ("address", "networks", "allowed"),
    [
        ("10.0.0.12", ["10.0.0.12"], True),
        ("10.0.0.13", ["10.0.0.12"], False),
        ("10.0.1.77", ["10.0.0.12", "10.0.1.0/24"], True),
        ("::ffff:10.0.0.12", ["10.0.0.12"], True),  # a dual-stack listener's view of an IPv4 peer
        ("::ffff:10.0.1.9", ["10.0.1.0/24"], True),
        ("10.0.0.12", ["::ffff:10.0.0.0/104"], True),
        ("fe80::1%eth0", ["fe80::/64"], True),
        ("2001:db8::5", ["10.0.0.0/8"], False),
        ("10.0.0.12", [], False),
        ("not-an-address", ["0.0.0.0/0"], False),
    ],
)
def test_an_address_is_in_its_networks(address: str, networks: list[str], allowed: bool) -> None:
    assert address_in_networks(address, networks) is allowed


def test_an_ipv4_mapped_peer_is_its_ipv4_address() -> None:
    assert str(peer_address("::ffff:192.168.1.20")) == "192.168.1.20"
    assert str(peer_address("2001:db8::1")) == "2001:db8::1"
    assert peer_address("scanner.local") is None


@pytest.mark.django_db
def test_a_calling_ae_is_allowed_from_its_networks_only_unless_any_address() -> None:
    branch = BranchFactory(code="BLR")
    DicomCallingAE.objects.create(ae_title="CT1", branch=branch, networks=["10.0.0.0/24"])
    DicomCallingAE.objects.create(ae_title="ANY1", branch=branch, any_address=True)

    assert calling_ae_allowed(ae_title="CT1 ", address="::ffff:10.0.0.7") is not None
    assert calling_ae_allowed(ae_title="CT1", address="10.0.1.7") is None
    assert calling_ae_allowed(ae_title="ANY1", address="203.0.113.9") is not None


@pytest.mark.django_db
def test_the_admin_flags_entries_accepted_from_any_address(admin_client: Any) -> None:
    branch = BranchFactory(code="BLR")
    scoped = DicomCallingAE.objects.create(ae_title="CT1", branch=branch, networks=["10.0.0.12"])
    anywhere = DicomCallingAE.objects.create(ae_title="ANY1", branch=branch, any_address=True)

    listing = admin_client.get("/admin/integrations/dicomcallingae/").content.decode()
    assert "10.0.0.12" in listing
    assert listing.count("ANY ADDRESS") == 1
    filtered = admin_client.get("/admin/integrations/dicomcallingae/?any_address__exact=1").content.decode()
    assert "ANY1" in filtered
    assert "CT1<" not in filtered

    page = admin_client.get(f"/admin/integrations/dicomcallingae/{anywhere.pk}/change/").content.decode()
    assert "ANY1 is accepted from ANY address" in page
    page = admin_client.get(f"/admin/integrations/dicomcallingae/{scoped.pk}/change/").content.decode()
    assert "accepted from ANY address" not in page


@pytest.mark.django_db
def test_the_admin_refuses_an_entry_without_addresses_and_warns_on_any_address(admin_client: Any) -> None:
    branch = BranchFactory(code="BLR")
    form = {"ae_title": "CT9", "branch": str(branch.pk), "networks": "", "active": "on", "description": ""}

    refused = admin_client.post("/admin/integrations/dicomcallingae/add/", form)
    assert refused.status_code == 200
    assert "Give the addresses the modality connects from" in refused.content.decode()
    assert DicomCallingAE.objects.count() == 0

    saved = admin_client.post("/admin/integrations/dicomcallingae/add/", {**form, "any_address": "on"}, follow=True)
    assert "CT9 is accepted from ANY address" in saved.content.decode()
    assert DicomCallingAE.objects.get().any_address is True

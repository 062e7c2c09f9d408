"""client_ip(): the socket peer is the client unless a trusted proxy forwarded the request."""

from __future__ import annotations

import ipaddress

import pytest
from django.test import RequestFactory

from clinic.api.network import client_ip

PROXY = "127.0.0.1"


@pytest.fixture
def trusted_proxies(settings):
    """A load balancer on localhost and an internal proxy tier in 10.0.0.0/8."""
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("10.0.0.0/8")]


def request_from(remote_addr: str | None, forwarded_for: str | None = None):
    request = RequestFactory().get("/api/v1/branches")
    if remote_addr is None:
        del request.META["REMOTE_ADDR"]
    else:
        request.META["REMOTE_ADDR"] = remote_addr
    if forwarded_for is not None:
        request.META["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return request


def test_ipv4_peer_is_the_client():
    assert client_ip(request_from("203.0.113.7")) == "203.0.113.7"


def test_ipv6_peer_is_the_client_in_compressed_form():
    assert client_ip(request_from("2001:0db8:0000:0000:0000:0000:0000:0005")) == "2001:db8::5"


def test_ipv4_mapped_ipv6_peer_is_reported_as_ipv4():
    assert client_ip(request_from("::ffff:10.0.0.1")) == "10.0.0.1"


def test_peer_with_port_is_reduced_to_the_address():
    assert client_ip(request_from("203.0.113.7:5123")) == "203.0.113.7"
    assert client_ip(request_from("[2001:db8::1]:443")) == "2001:db8::1"


def test_forwarded_for_from_an_untrusted_peer_is_ignored(trusted_proxies):
    assert client_ip(request_from("198.51.100.9", "10.1.2.3")) == "198.51.100.9"


def test_forwarded_for_is_ignored_when_no_proxy_is_trusted(settings):
    settings.TRUSTED_PROXIES = []
    assert client_ip(request_from(PROXY, "10.1.2.3")) == PROXY


def test_trusted_peer_forwards_the_client_address(trusted_proxies):
    assert client_ip(request_from(PROXY, "198.51.100.9")) == "198.51.100.9"


def test_trusted_chain_of_two_proxies_is_walked_from_the_right(trusted_proxies):
    # client 198.51.100.9 -> internal proxy 10.0.0.2 -> load balancer 127.0.0.1 -> us
    assert client_ip(request_from(PROXY, "198.51.100.9, 10.0.0.2")) == "198.51.100.9"


def test_hops_left_of_the_first_untrusted_hop_are_ignored(trusted_proxies):
    # The client itself sent "X-Forwarded-For: 10.1.2.3"; the proxies appended its real address.
    assert client_ip(request_from(PROXY, "10.1.2.3, 198.51.100.9, 10.0.0.2")) == "198.51.100.9"


def test_malformed_hop_stops_the_walk_at_the_last_parsed_hop(trusted_proxies):
    assert client_ip(request_from(PROXY, "198.51.100.9, not-an-address, 10.0.0.2")) == "10.0.0.2"
    assert client_ip(request_from(PROXY, "198.51.100.9, not-an-address")) == PROXY


def test_chain_of_only_trusted_hops_resolves_to_the_leftmost(trusted_proxies):
    assert client_ip(request_from(PROXY, "10.0.0.3, 10.0.0.2")) == "10.0.0.3"


def test_trusted_peer_without_forwarded_for_is_the_client(trusted_proxies):
    assert client_ip(request_from(PROXY)) == PROXY
    assert client_ip(request_from(PROXY, " , ")) == PROXY


def test_ipv4_mapped_forwarded_hop_is_reported_as_ipv4(trusted_proxies):
    assert client_ip(request_from(PROXY, "::ffff:198.51.100.9")) == "198.51.100.9"


def test_missing_or_unparseable_peer_gives_no_address(trusted_proxies):
    assert client_ip(request_from(None)) is None
    assert client_ip(request_from("")) is None
    assert client_ip(request_from("unknown", "198.51.100.9")) is None


def test_address_is_resolved_once_per_request(trusted_proxies):
    request = request_from(PROXY, "198.51.100.9")
    assert client_ip(request) == "198.51.100.9"
    request.META["HTTP_X_FORWARDED_FOR"] = "203.0.113.1"
    assert client_ip(request) == "198.51.100.9"

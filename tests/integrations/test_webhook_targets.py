"""SSRF protection: hostile target URLs are refused when a subscription is saved and again when a delivery
is attempted (against the address the name resolves to then); the connection goes to the checked address
with no second lookup; https verifies the certificate against the host name (SNI)."""

from __future__ import annotations

import socket

import pytest
from django.core.exceptions import ValidationError

from integrations.webhooks import transport
from integrations.webhooks.delivery import delivery_attempt
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from integrations.webhooks.targets import TargetRefused, target_check, target_parse
from tests.integrations.webhook_receiver import (
    PUBLIC_TEST_ADDRESS,
    Receiver,
    fake_dns,
    receiver,
    subscribe,
    tls_certificate,
    verify,
)

pytestmark = pytest.mark.django_db
__all__ = ["fake_dns", "receiver", "tls_certificate"]

PAYLOAD = {"appointment": {"appointment_id": "5b0f5a61-8a37-4c1b-9f0e-1d7c1a1e2f33", "status": "booked"}}

HOSTILE_URLS = [
    # not https, or not a URL at all
    "http://hooks.example.com/webhooks",
    "ftp://hooks.example.com/",
    "file:///etc/passwd",
    "gopher://hooks.example.com:70/_GET",
    "javascript:alert(1)",
    "//hooks.example.com/no-scheme",
    "",
    # loopback, private, link-local and cloud metadata, CGNAT, special ranges
    "https://127.0.0.1/",
    "https://127.255.255.254:8443/admin",
    "https://localhost/",
    "https://api.localhost/",
    "https://10.0.0.5/",
    "https://172.16.3.4/",
    "https://192.168.1.1/",
    "https://169.254.169.254/latest/meta-data/",
    "https://100.64.0.1/",
    "https://0.0.0.0/",
    "https://224.0.0.1/",
    "https://240.0.0.1/",
    "https://255.255.255.255/",
    "https://198.18.0.1/",
    "https://192.0.2.10/",
    # IPv6: loopback, unspecified, ULA, link-local (with a zone), multicast, IPv4-mapped and embedded forms
    "https://[::1]/",
    "https://[::]/",
    "https://[fc00::1]/",
    "https://[fd12:3456:789a::1]/",
    "https://[fe80::1]/",
    "https://[fe80::1%25eth0]/",
    "https://[ff02::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::ffff:169.254.169.254]/",
    "https://[::ffff:10.0.0.1]:443/",
    "https://[::127.0.0.1]/",
    "https://[2002:7f00:1::1]/",
    "https://[64:ff9b::a00:1]/",
    "https://[2001:db8::1]/",
    # numeric forms a resolver reads as 127.0.0.1 (or other addresses)
    "https://2130706433/",
    "https://0x7f000001/",
    "https://0177.0.0.1/",
    "https://017700000001/",
    "https://127.1/",
    "https://0x7f.0.0.1/",
    "https://0/",
    "https://1.2.3.4.5/",
    "https://134744072/",
    # credentials and parser confusion
    "https://user:password@hooks.example.com/",
    "https://user@hooks.example.com/",
    "https://hooks.example.com@127.0.0.1/",
    "https://hooks.example.com\\@127.0.0.1/",
    "https://hooks.example.com /x",
    "https://hooks.example.com/\r\nX-Injected: 1",
    "https://hooks.example.com:0/",
    "https://hooks.example.com:99999/",
    "https:///only-a-path",
    # names: single-label, and names resolving to non-public addresses (or not at all)
    "https://metadata/computeMetadata/v1/",
    "https://internal.example.com/",
    "https://loopback.example.com/",
    "https://metadata.example.com/",
    "https://v6-loopback.example.com/",
    "https://mapped.example.com/",
    "https://mixed.example.com/",
    "https://nxdomain.example.com/",
]


@pytest.fixture(autouse=True)
def hostile_dns(fake_dns, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    fake_dns.records.update(
        {
            "internal.example.com": ["10.1.2.3"],
            "loopback.example.com": ["127.0.0.1"],
            "metadata.example.com": ["169.254.169.254"],
            "v6-loopback.example.com": ["::1"],
            "mapped.example.com": ["::ffff:10.0.0.1"],
            "mixed.example.com": [PUBLIC_TEST_ADDRESS, "192.168.1.1"],
        }
    )
    return fake_dns


def test_the_corpus_is_large():
    assert len(HOSTILE_URLS) >= 30
    assert len(set(HOSTILE_URLS)) == len(HOSTILE_URLS)


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_hostile_target_is_refused_on_save(url):
    with pytest.raises(ValidationError) as refused:
        subscribe(url)
    assert list(refused.value.message_dict) == ["target_url"]
    assert not WebhookSubscription.objects.exists()


@pytest.fixture
def no_connection(monkeypatch):
    def connect(**kwargs):
        raise AssertionError(f"no connection may be attempted: {kwargs['target']}")

    monkeypatch.setattr(transport, "post", connect)


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_hostile_target_is_refused_at_send_time_without_connecting(url, no_connection):
    subscription, _ = subscribe("https://hooks.example.com/webhooks")
    # A row saved before the rule existed, or edited behind the admin's back: the send-time check stands alone.
    WebhookSubscription.objects.filter(pk=subscription.pk).update(target_url=url)
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    delivery = WebhookDelivery.objects.get()

    assert delivery_attempt(delivery_id=delivery.pk) == "retry"

    attempt = WebhookAttempt.objects.get()
    assert attempt.error.startswith("Target refused: ")
    assert (attempt.status_code, attempt.address) == (None, None)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == attempt.error


def test_a_name_re_pointed_at_a_private_address_after_save_is_refused_at_send_time(hostile_dns, no_connection):
    answers = iter([[PUBLIC_TEST_ADDRESS], ["127.0.0.1"]])
    hostile_dns.records["rebind.example.com"] = lambda: next(answers)
    subscribe("https://rebind.example.com/hook")  # public when saved
    event_publish(event_type="appointment.booked", payload=PAYLOAD)

    delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)

    assert WebhookAttempt.objects.get().error == (
        "Target refused: rebind.example.com resolves to a non-public address: "
        "127.0.0.1 is a loopback address (127.0.0.0/8)."
    )
    assert hostile_dns.lookups == ["rebind.example.com", "rebind.example.com"]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/webhooks",
        "https://hooks.example.com:8443/v1/in?token=abc",
        "https://HOOKS.Example.COM./x",
        "https://8.8.8.8/hooks",
        "https://[2606:4700:4700::1111]/hooks",
    ],
)
def test_public_https_targets_are_accepted(url):
    subscription, _ = subscribe(url)
    assert subscription.target_url == url


def test_refusals_name_the_reason():
    def reason(url):
        with pytest.raises(TargetRefused) as refused:
            target_check(url, allow_private=False)
        return str(refused.value)

    assert reason("http://hooks.example.com/") == "The URL must use https."
    assert reason("https://u:p@hooks.example.com/") == (
        "Credentials in the URL are not allowed; use an extra header for authentication."
    )
    assert reason("https://169.254.169.254/") == (
        "The target must be a public address: 169.254.169.254 is a link-local (cloud metadata) address "
        "(169.254.0.0/16)."
    )
    assert reason("https://0x7f000001/") == (
        "'0x7f000001' is not a canonical IPv4 address (dotted decimal, no leading zeros)."
    )
    assert reason("https://[2002:7f00:1::1]/") == (
        "The target must be a public address: 2002:7f00:1::1 embeds 127.0.0.1: "
        "127.0.0.1 is a loopback address (127.0.0.0/8)."
    )
    assert reason("https://nxdomain.example.com/") == (
        "nxdomain.example.com does not resolve: [Errno -2] Name or service not known"
    )


def test_the_development_setting_allows_http_and_private_addresses_but_not_credentials_or_odd_numbers():
    assert target_parse("http://127.0.0.1:8000/hooks", allow_private=True).host_header == "127.0.0.1:8000"
    assert target_parse("http://localhost/hooks", allow_private=True).port == 80
    assert target_parse("https://[::1]:8443/", allow_private=True).host_header == "[::1]:8443"
    for url in ("http://u:p@127.0.0.1/", "http://0x7f000001/", "http://2130706433/", "file:///etc/passwd"):
        with pytest.raises(TargetRefused):
            target_parse(url, allow_private=True)


def test_the_connection_goes_to_the_checked_address_with_no_second_lookup(receiver, hostile_dns, monkeypatch):
    hostile_dns.records["hooks.internal.test"] = ["127.0.0.1"]
    real_getaddrinfo = socket.getaddrinfo

    def guarded_getaddrinfo(host, *args, **kwargs):
        assert host != "hooks.internal.test", "the transport looked the name up again"
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    _, secret = subscribe(receiver.url(host="hooks.internal.test"))
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    hostile_dns.lookups.clear()

    assert delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk) == "succeeded"

    (received,) = receiver.requests
    assert received.headers["host"] == f"hooks.internal.test:{receiver.port}"
    assert verify(received, secret)["data"] == PAYLOAD
    assert hostile_dns.lookups == ["hooks.internal.test"]  # one lookup, checked, then connected to
    assert WebhookAttempt.objects.get().address == "127.0.0.1"


@pytest.fixture
def tls_receiver(settings, tls_certificate, hostile_dns, monkeypatch):
    """An https receiver on 127.0.0.1 presenting a certificate for hooks.example.test (trusted here)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    certificate = tls_certificate("hooks.example.test")
    server = Receiver(tls=certificate.server_context())
    hostile_dns.records["hooks.example.test"] = ["127.0.0.1"]
    hostile_dns.records["other.example.test"] = ["127.0.0.1"]
    monkeypatch.setattr(transport, "tls_context", certificate.client_context)
    yield server
    server.close()


def test_https_sends_sni_and_verifies_the_certificate_against_the_host_name(tls_receiver):
    _, secret = subscribe(tls_receiver.url(host="hooks.example.test"))
    event_publish(event_type="appointment.booked", payload=PAYLOAD)

    assert delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk) == "succeeded"

    (received,) = tls_receiver.requests
    assert received.server_name == "hooks.example.test"
    assert verify(received, secret)["data"] == PAYLOAD


def test_a_certificate_for_another_name_is_refused(tls_receiver):
    subscribe(tls_receiver.url(host="other.example.test"))
    event_publish(event_type="appointment.booked", payload=PAYLOAD)

    assert delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk) == "retry"

    assert tls_receiver.requests == []
    error = WebhookAttempt.objects.get().error
    assert error.startswith("TLS certificate of other.example.test not accepted: Hostname mismatch")

"""Acknowledgements that destinations send back, read as their MSH-18 declares (docs/hl7-outbound.md): what the
attempt log keeps never holds a replacement character."""

from __future__ import annotations

import pytest

from integrations.hl7.client import TransportError, ack_parse


def test_a_latin1_ack_declared_8859_1_is_read_as_latin1() -> None:
    payload = (
        "MSH|^~\\&|LIS|CITYLAB|CLINIC|BLR|20261128||ACK^O01^ACK|A1|P|2.5.1|||||8859/1\rMSA|AE|X1|Données refusées\r"
    )
    ack = ack_parse(payload.encode("latin-1"), "X1")
    assert (ack.code, ack.text) == ("AE", "Données refusées")


def test_an_ack_without_msh_18_is_read_as_utf8() -> None:
    payload = "MSH|^~\\&|LIS|CITYLAB|CLINIC|BLR|20261128||ACK^O01^ACK|A1|P|2.5.1\rMSA|AE|X1|Ungültiger Wert ✓\r"
    assert ack_parse(payload.encode("utf-8"), "X1").text == "Ungültiger Wert ✓"


def test_an_ack_whose_bytes_are_not_its_declared_charset_is_kept_without_replacement_characters() -> None:
    payload = "MSH|^~\\&|LIS|CITYLAB|CLINIC|BLR|20261128||ACK^O01^ACK|A1|P|2.5.1\rMSA|AE|X1|Donn\xe9es\r"
    ack = ack_parse(payload.encode("latin-1"), "X1")  # no MSH-18, so UTF-8 is expected; 0xE9 is not UTF-8
    assert ack.text == "Données"
    assert "\ufffd" not in ack.text


def test_an_ack_for_another_control_id_is_a_transport_error() -> None:
    payload = b"MSH|^~\\&|LIS|CITYLAB|CLINIC|BLR|20261128||ACK^O01^ACK|A1|P|2.5.1\rMSA|AA|OTHER\r"
    with pytest.raises(TransportError, match="OTHER"):
        ack_parse(payload, "X1")

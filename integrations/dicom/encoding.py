"""A worklist answer written straight to DICOM bytes (little endian, implicit or explicit VR), the same bytes
pydicom's writer produces for the same elements (tests/integrations/dicom/test_encoding.py compares them).

Why: a modality's day list is tens of answers, and building each as a pydicom Dataset and writing it through
pydicom's general writer (keyword lookups, value conversion and validation per element) was most of a C-FIND's
server time (bench/results/dicom_worklist.md). Our answers hold a dozen text elements and two sequences, all of
known tags and VRs, so they are encoded here from plain values. pynetdicom still encodes the command sets and
does the transport; any other transfer syntax (big endian, deflated) goes through pydicom as before.

An element is (keyword, value): the value is text, or for a sequence a list of items, each a list of elements.
"""

from __future__ import annotations

import struct
from functools import cache

from pydicom.datadict import dictionary_VR, tag_for_keyword
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence

Element = tuple[str, str | list[list["Element"]]]

# PS3.5 7.1.2: in explicit VR these have a reserved 16-bit field and a 32-bit length.
_LONG_LENGTH_VRS = frozenset({"OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV", "UC", "UN", "UR", "UT", "UV"})
_ITEM = b"\xfe\xff\x00\xe0"  # (FFFE,E000), little endian
# Numbers in binary: the answers only ever hold them empty (zero length), written as empty text would be.
_BINARY_VRS = frozenset({"US", "SS", "UL", "SL", "FL", "FD", "UV", "SV", "AT"})


@cache
def _tag_and_vr(keyword: str) -> tuple[int, str, bytes]:
    tag = tag_for_keyword(keyword)
    if tag is None:
        raise KeyError(f"Not a DICOM keyword: {keyword}")
    vr = dictionary_VR(tag)
    return tag, vr, struct.pack("<HH", tag >> 16, tag & 0xFFFF)


def _text(value: str, vr: str) -> bytes:
    data = value.encode("utf-8")  # the answers say SpecificCharacterSet ISO_IR 192
    if len(data) % 2:
        data += b"\x00" if vr == "UI" else b" "  # PS3.5 6.2: UI pads with NUL, text with a space
    return data


def _dataset_bytes(elements: list[Element], explicit_vr: bool) -> bytes:
    parts = []
    for keyword, value in sorted(elements, key=lambda element: _tag_and_vr(element[0])[0]):
        _, vr, tag_bytes = _tag_and_vr(keyword)
        if isinstance(value, str):
            data = _text(value, vr)
        else:
            data = b"".join(
                _ITEM + struct.pack("<I", len(body)) + body
                for body in (_dataset_bytes(item, explicit_vr) for item in value)
            )
        if not explicit_vr:
            parts.append(tag_bytes + struct.pack("<I", len(data)) + data)
        elif vr in _LONG_LENGTH_VRS:
            parts.append(tag_bytes + vr.encode() + b"\x00\x00" + struct.pack("<I", len(data)) + data)
        else:
            if len(data) > 0xFFFF:
                raise ValueError(f"{keyword} is too long for its VR {vr}.")
            parts.append(tag_bytes + vr.encode() + struct.pack("<H", len(data)) + data)
    return b"".join(parts)


def elements_encode(elements: list[Element], *, explicit_vr: bool) -> bytes:
    """The elements as a little-endian data set, in tag order, with defined lengths (as pydicom writes)."""
    return _dataset_bytes(elements, explicit_vr)


def elements_dataset(elements: list[Element]) -> Dataset:
    """The same elements as a pydicom Dataset (for the transfer syntaxes encoded by pydicom, and for tests)."""
    dataset = Dataset()
    for keyword, value in elements:
        if isinstance(value, str):
            # An empty binary value (US: Pregnancy Status) is None to pydicom, as it reads one.
            setattr(dataset, keyword, None if not value and _tag_and_vr(keyword)[1] in _BINARY_VRS else value)
        else:
            setattr(dataset, keyword, Sequence([elements_dataset(item) for item in value]))
    return dataset


class EncodedAnswer(Dataset):
    """A C-FIND answer that carries its elements, so the worklist's encode hook (integrations.dicom.server)
    writes them with elements_encode; as a Dataset it is empty until `dataset()` builds the pydicom form."""

    def __init__(self, elements: list[Element]) -> None:
        super().__init__()
        self.__dict__["answer_elements"] = elements  # not a DICOM attribute: kept out of Dataset.__setattr__

    def dataset(self) -> Dataset:
        return elements_dataset(self.__dict__["answer_elements"])

    def encoded(self, *, explicit_vr: bool) -> bytes:
        return elements_encode(self.__dict__["answer_elements"], explicit_vr=explicit_vr)

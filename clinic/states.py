"""Indian states and union territories: the closed list that addresses name (docs/api-rules.md §12).

`IndianState` holds the canonical names, which are what is stored and returned. `state_resolve` reads
what a client may send, and nothing else:

- the name, ignoring case and whitespace (spaces anywhere, so "TamilNadu" and " tamil  nadu " both work),
  with "&" read as "and" ("Jammu & Kashmir"); official former names are aliases (Orissa, Uttaranchal,
  Pondicherry, "NCT of Delhi", and the two union territories merged in 2020, Dadra and Nagar Haveli and
  Daman and Diu, whose land lies wholly inside today's merged territory);
- the ISO 3166-2:IN code, ignoring case ("IN-KA", "in-ka"), current or withdrawn for the same territory
  (IN-TS for Telangana, IN-UT for Uttarakhand, IN-CT for Chhattisgarh, IN-OR for Odisha, IN-DD and IN-DN);
- the two-digit GST state code, ASCII digits only ("29"; "07", not "7"), plus 25, the withdrawn code of
  Daman and Diu. GST codes that name no single state are refused: 28 (Andhra Pradesh before Telangana was
  split off: it could be either), 97 (Other Territory) and 99 (Centre Jurisdiction).

Everything else resolves to None: no fuzzy matching, no spelling correction ("Karnatka" is not a state),
and nothing but ASCII apart from whitespace (full-width digits or a look-alike letter are not recognised).
"""

from __future__ import annotations

from django.db import models


class IndianState(models.TextChoices):
    # A label is derived from the member's name unless given: given where that would not be the name.
    JAMMU_AND_KASHMIR = "Jammu and Kashmir", "Jammu and Kashmir"
    HIMACHAL_PRADESH = "Himachal Pradesh"
    PUNJAB = "Punjab"
    CHANDIGARH = "Chandigarh"
    UTTARAKHAND = "Uttarakhand"
    HARYANA = "Haryana"
    DELHI = "Delhi"
    RAJASTHAN = "Rajasthan"
    UTTAR_PRADESH = "Uttar Pradesh"
    BIHAR = "Bihar"
    SIKKIM = "Sikkim"
    ARUNACHAL_PRADESH = "Arunachal Pradesh"
    NAGALAND = "Nagaland"
    MANIPUR = "Manipur"
    MIZORAM = "Mizoram"
    TRIPURA = "Tripura"
    MEGHALAYA = "Meghalaya"
    ASSAM = "Assam"
    WEST_BENGAL = "West Bengal"
    JHARKHAND = "Jharkhand"
    ODISHA = "Odisha"
    CHHATTISGARH = "Chhattisgarh"
    MADHYA_PRADESH = "Madhya Pradesh"
    GUJARAT = "Gujarat"
    DADRA_NAGAR_HAVELI_DAMAN_DIU = (
        "Dadra and Nagar Haveli and Daman and Diu",
        "Dadra and Nagar Haveli and Daman and Diu",
    )
    MAHARASHTRA = "Maharashtra"
    KARNATAKA = "Karnataka"
    GOA = "Goa"
    LAKSHADWEEP = "Lakshadweep"
    KERALA = "Kerala"
    TAMIL_NADU = "Tamil Nadu"
    PUDUCHERRY = "Puducherry"
    ANDAMAN_AND_NICOBAR = "Andaman and Nicobar Islands", "Andaman and Nicobar Islands"
    TELANGANA = "Telangana"
    ANDHRA_PRADESH = "Andhra Pradesh"
    LADAKH = "Ladakh"


# The first two digits of a GSTIN registered in the state.
GST_STATE_CODES: dict[str, str] = {
    IndianState.JAMMU_AND_KASHMIR: "01",
    IndianState.HIMACHAL_PRADESH: "02",
    IndianState.PUNJAB: "03",
    IndianState.CHANDIGARH: "04",
    IndianState.UTTARAKHAND: "05",
    IndianState.HARYANA: "06",
    IndianState.DELHI: "07",
    IndianState.RAJASTHAN: "08",
    IndianState.UTTAR_PRADESH: "09",
    IndianState.BIHAR: "10",
    IndianState.SIKKIM: "11",
    IndianState.ARUNACHAL_PRADESH: "12",
    IndianState.NAGALAND: "13",
    IndianState.MANIPUR: "14",
    IndianState.MIZORAM: "15",
    IndianState.TRIPURA: "16",
    IndianState.MEGHALAYA: "17",
    IndianState.ASSAM: "18",
    IndianState.WEST_BENGAL: "19",
    IndianState.JHARKHAND: "20",
    IndianState.ODISHA: "21",
    IndianState.CHHATTISGARH: "22",
    IndianState.MADHYA_PRADESH: "23",
    IndianState.GUJARAT: "24",
    IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU: "26",
    IndianState.MAHARASHTRA: "27",
    IndianState.KARNATAKA: "29",
    IndianState.GOA: "30",
    IndianState.LAKSHADWEEP: "31",
    IndianState.KERALA: "32",
    IndianState.TAMIL_NADU: "33",
    IndianState.PUDUCHERRY: "34",
    IndianState.ANDAMAN_AND_NICOBAR: "35",
    IndianState.TELANGANA: "36",
    IndianState.ANDHRA_PRADESH: "37",
    IndianState.LADAKH: "38",
}

# The current ISO 3166-2:IN subdivision codes.
ISO_CODES: dict[IndianState, str] = {
    IndianState.JAMMU_AND_KASHMIR: "IN-JK",
    IndianState.HIMACHAL_PRADESH: "IN-HP",
    IndianState.PUNJAB: "IN-PB",
    IndianState.CHANDIGARH: "IN-CH",
    IndianState.UTTARAKHAND: "IN-UK",
    IndianState.HARYANA: "IN-HR",
    IndianState.DELHI: "IN-DL",
    IndianState.RAJASTHAN: "IN-RJ",
    IndianState.UTTAR_PRADESH: "IN-UP",
    IndianState.BIHAR: "IN-BR",
    IndianState.SIKKIM: "IN-SK",
    IndianState.ARUNACHAL_PRADESH: "IN-AR",
    IndianState.NAGALAND: "IN-NL",
    IndianState.MANIPUR: "IN-MN",
    IndianState.MIZORAM: "IN-MZ",
    IndianState.TRIPURA: "IN-TR",
    IndianState.MEGHALAYA: "IN-ML",
    IndianState.ASSAM: "IN-AS",
    IndianState.WEST_BENGAL: "IN-WB",
    IndianState.JHARKHAND: "IN-JH",
    IndianState.ODISHA: "IN-OD",
    IndianState.CHHATTISGARH: "IN-CG",
    IndianState.MADHYA_PRADESH: "IN-MP",
    IndianState.GUJARAT: "IN-GJ",
    IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU: "IN-DH",
    IndianState.MAHARASHTRA: "IN-MH",
    IndianState.KARNATAKA: "IN-KA",
    IndianState.GOA: "IN-GA",
    IndianState.LAKSHADWEEP: "IN-LD",
    IndianState.KERALA: "IN-KL",
    IndianState.TAMIL_NADU: "IN-TN",
    IndianState.PUDUCHERRY: "IN-PY",
    IndianState.ANDAMAN_AND_NICOBAR: "IN-AN",
    IndianState.TELANGANA: "IN-TG",
    IndianState.ANDHRA_PRADESH: "IN-AP",
    IndianState.LADAKH: "IN-LA",
}

# Withdrawn codes and former names, each of a territory that lies wholly inside one of today's.
FORMER_ISO_CODES: dict[str, IndianState] = {
    "IN-TS": IndianState.TELANGANA,  # IN-TG since 2023
    "IN-UT": IndianState.UTTARAKHAND,  # IN-UK since 2020
    "IN-CT": IndianState.CHHATTISGARH,  # IN-CG since 2020
    "IN-OR": IndianState.ODISHA,  # IN-OD since 2011
    "IN-DD": IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU,  # Daman and Diu, merged in 2020
    "IN-DN": IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU,  # Dadra and Nagar Haveli, merged in 2020
}
FORMER_GST_STATE_CODES: dict[str, IndianState] = {
    "25": IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU,  # Daman and Diu, before the 2020 merger
}
FORMER_NAMES: dict[str, IndianState] = {
    "Orissa": IndianState.ODISHA,
    "Uttaranchal": IndianState.UTTARAKHAND,
    "Pondicherry": IndianState.PUDUCHERRY,
    "NCT of Delhi": IndianState.DELHI,
    "National Capital Territory of Delhi": IndianState.DELHI,
    "Dadra and Nagar Haveli": IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU,
    "Daman and Diu": IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU,
}


def _name_key(text: str) -> str | None:
    """Case and whitespace ignored, "&" read as "and"; None for text with other than ASCII between the
    spaces (a look-alike letter such as the Kelvin sign would otherwise casefold into a name)."""
    compact = "".join(text.split())
    return compact.replace("&", "and").lower() if compact.isascii() else None


_BY_NAME: dict[str, IndianState] = {
    key: state
    for name, state in [*((state.value, state) for state in IndianState), *FORMER_NAMES.items()]
    if (key := _name_key(name))
}
_BY_ISO: dict[str, IndianState] = {**{code: state for state, code in ISO_CODES.items()}, **FORMER_ISO_CODES}
_BY_GST: dict[str, IndianState] = {
    **{code: IndianState(name) for name, code in GST_STATE_CODES.items()},
    **FORMER_GST_STATE_CODES,
}


def state_resolve(text: str) -> IndianState | None:
    """The state `text` names (by name, ISO 3166-2:IN code or GST state code), or None."""
    code = text.strip()
    if code.isascii() and code.isdigit() and len(code) == 2:
        return _BY_GST.get(code)
    if code.isascii() and code[:3].upper() == "IN-":
        return _BY_ISO.get(code.upper())
    key = _name_key(text)
    return _BY_NAME.get(key) if key else None


def state_gst_code(name: str) -> str:
    """The GST state code of a state given by its canonical name; ValueError for anything else."""
    return GST_STATE_CODES[IndianState(name)]


_BASE36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def gstin_check_character(first14: str) -> str:
    """The GSTIN's 15th character: a checksum of the first 14 (base 36, weights 1 and 2 alternating, the
    base-36 digits of each product summed), which the GST portal rejects a number without."""
    total = 0
    for index, char in enumerate(first14):
        product = _BASE36.index(char) * (2 if index % 2 else 1)
        total += product // 36 + product % 36
    return _BASE36[(36 - total % 36) % 36]

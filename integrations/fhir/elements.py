"""`_summary` and `_elements`: a resource cut down to some of its top-level elements, tagged SUBSETTED.

What is kept (https://hl7.org/fhir/R4/search.html#summary and #elements): `resourceType`, `id` and `meta`
always; `_summary=true` the elements the R4 base definitions mark as summary (SUMMARY below, written out
from the specification: fhir.resources 6.4.0 does not carry the flag); `_summary=data` everything but the
narrative `text`; `_elements` the elements named. Either way the elements the resource must have (min 1 in
R4) are kept too, so that a subsetted resource still reads as a valid one (the spec's SHOULD for
`_elements`; the server checks everything it emits against the R4 models, docs/fhir.md §2).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from integrations.fhir import r4

# The v3 ObservationValue code the specification tells servers to tag a subsetted resource with.
SUBSETTED = {
    "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue",
    "code": "SUBSETTED",
    "display": "Resource content has been reduced",
}
ALWAYS = frozenset({"resourceType", "id", "meta"})

# Summary elements (Σ in the R4 base definitions) of the types this server emits; `[x]` is a choice.
SUMMARY: dict[str, frozenset[str]] = {
    name: frozenset(elements.split())
    for name, elements in {
        "Patient": "identifier active name telecom gender birthDate deceased[x] address managingOrganization link",
        "Practitioner": "identifier active name telecom address gender birthDate",
        "Organization": "identifier active type name partOf",
        "Location": "identifier status operationalStatus name description mode type physicalType managingOrganization",
        "Appointment": "identifier status cancelationReason serviceCategory serviceType specialty appointmentType "
        "reasonCode reasonReference start end",
        "Slot": "identifier serviceCategory serviceType specialty appointmentType schedule status start end",
        "Encounter": "identifier status class type serviceType subject episodeOfCare participant appointment "
        "reasonCode reasonReference diagnosis",
        "Condition": "identifier clinicalStatus verificationStatus code bodySite subject encounter onset[x] "
        "abatement[x] recordedDate recorder asserter",
        "AllergyIntolerance": "identifier clinicalStatus verificationStatus type category criticality code patient",
        "MedicationRequest": "status intent priority doNotPerform reported[x] medication[x] subject authoredOn "
        "requester performer performerType instantiatesCanonical instantiatesUri basedOn groupIdentifier",
        "MedicationDispense": "status medication[x] subject whenPrepared",
        "ServiceRequest": "identifier instantiatesCanonical instantiatesUri basedOn replaces requisition status "
        "intent category priority doNotPerform code orderDetail quantity[x] subject encounter occurrence[x] "
        "asNeeded[x] authoredOn requester performerType performer locationCode locationReference reasonCode "
        "reasonReference specimen bodySite patientInstruction",
        "Observation": "identifier basedOn partOf status code subject focus encounter effective[x] issued "
        "performer value[x] hasMember derivedFrom component",
        "DiagnosticReport": "identifier status category code subject encounter effective[x] issued performer "
        "resultsInterpreter media",
    }.items()
}


@cache
def element_names(resource_type: str) -> frozenset[str]:
    """The top-level element names of an R4 type (choices both as `value[x]` stems and each `valueQuantity`)."""
    fields = r4.model_class(resource_type).__fields__
    names = {field.alias for field in fields.values() if not field.alias.startswith("_")}
    return frozenset((names | _choice_stems(resource_type)) - {"resource_type", "fhir_comments"})


@cache
def required_elements(resource_type: str) -> frozenset[str]:
    """The elements R4 requires (min 1): fhir.resources marks them `element_required`, or pydantic `required`."""
    fields = r4.model_class(resource_type).__fields__.values()
    return frozenset(
        field.alias for field in fields if field.required or field.field_info.extra.get("element_required")
    )


def _choice_stems(resource_type: str) -> set[str]:
    fields = r4.model_class(resource_type).__fields__.values()
    return {
        field.field_info.extra["one_of_many"]
        for field in fields
        if field.field_info.extra.get("one_of_many") and not field.alias.startswith("_")
    }


def unknown_elements(resource_type: str, names: list[str]) -> list[str]:
    known = element_names(resource_type)
    return [name for name in names if name.removesuffix("[x]") not in known]


def _wanted(key: str, names: frozenset[str]) -> bool:
    if key in names:
        return True
    # A choice: `value[x]` or `value` (as sent in _elements) keeps valueQuantity, valueString, ...
    return any(
        key.startswith(stem) and key[len(stem) : len(stem) + 1].isupper()
        for stem in (name.removesuffix("[x]") for name in names)
    )


def subset(resource: dict[str, Any], *, summary: str, elements: tuple[str, ...]) -> dict[str, Any]:
    """The resource as `_summary` (true, data or false) and `_elements` ask; unchanged when neither cuts."""
    resource_type = resource["resourceType"]
    if elements:
        keep = ALWAYS | frozenset(elements) | required_elements(resource_type)
    elif summary == "true":
        keep = ALWAYS | SUMMARY.get(resource_type, frozenset()) | required_elements(resource_type)
    elif summary == "data":
        keep = frozenset(key for key in resource if key != "text")
    else:
        return resource
    kept = {key: value for key, value in resource.items() if _wanted(key, keep)}
    if summary != "data" or "text" in resource:
        meta = dict(kept.get("meta", {}))
        meta["tag"] = [*meta.get("tag", []), SUBSETTED]
        kept["meta"] = meta
    return kept

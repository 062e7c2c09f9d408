"""The CapabilityStatement (GET /fhir/R4/metadata): what this server does, built from the registry so it
cannot drift from what the views accept. It points at the OpenAPI document of the REST API (which points
back here, clinic.api.openapi)."""

from __future__ import annotations

from typing import Any

from integrations.fhir.registry import RESOURCE_TYPES

SOFTWARE_VERSION = "1.0"
OAUTH_URIS = "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"
LAST_UPDATED = {"name": "_lastUpdated", "type": "date", "documentation": "When last updated (meta.lastUpdated)."}
EVERYTHING_DOCUMENTATION = (
    "All of the OperationDefinition's parameters: `start` and `end` (a window of care dates: each resource's "
    "clinical date, such as Observation.effective or Encounter.period.start; the Patient is always in it), "
    "`_since` (an instant: resources updated since), `_type` (a comma list of the compartment's types), "
    "`_count` (default 1000, capped at 5000; 0 answers the total only) and `_offset`, with next links."
)
RESULT_PARAMETERS = (
    "Every search takes `_count` (default 20; above 100 capped to 100; 0 answers the total only), `_offset`, "
    "`_sort` (the keys of each type), `_summary` (true, data, count; text is 400: no narrative), `_elements`, "
    "`_total` (accurate, estimate, none) and `_lastUpdated`. Tokens take system|code, system| and |code. "
    "Reads answer an ETag; If-None-Match with it is 304. JSON only: an Accept without JSON is 406."
)


def capability_statement(base: str) -> dict[str, Any]:
    origin = base.removesuffix("/fhir/R4/")
    resources = []
    for resource in RESOURCE_TYPES.values():
        entry: dict[str, Any] = {
            "type": resource.name,
            "documentation": "Scope " + " or ".join(f"`{scope}`" for scope in resource.scopes) + ".",
            "interaction": [{"code": "read"}, {"code": "search-type"}],
            "searchParam": [
                *(
                    {"name": name, "type": param.type, "documentation": param.documentation}
                    for name, param in resource.params.items()
                    if ":" not in name
                ),
                *([] if "_lastUpdated" in resource.params else [LAST_UPDATED]),
            ],
        }
        if resource.includes:
            entry["searchInclude"] = list(resource.includes)
        if resource.name == "Patient":
            entry["operation"] = [
                {
                    "name": "everything",
                    "definition": "http://hl7.org/fhir/OperationDefinition/Patient-everything",
                    "documentation": EVERYTHING_DOCUMENTATION,
                },
                {"name": "export", "definition": "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export"},
            ]
        resources.append(entry)
    resources.insert(
        [resource["type"] for resource in resources].index("Appointment") + 1,
        {
            "type": "Slot",
            "documentation": "Scope `appointments:read`. Free cells of a doctor's schedule, computed: search needs "
            "`practitioner` and `start` (at most 14 days); paged like every search (`_count`, `_offset`, `_sort` "
            "start or _id).",
            "interaction": [{"code": "read"}, {"code": "search-type"}],
            "searchParam": [
                {"name": "practitioner", "type": "reference", "documentation": "Practitioner/<id> (required)."},
                {"name": "start", "type": "date", "documentation": "A day or a range of at most 14 days."},
                {"name": "location", "type": "reference", "documentation": "The branch: Location/<id>."},
                {"name": "status", "type": "token", "documentation": "free"},
            ],
        },
    )
    return {
        "resourceType": "CapabilityStatement",
        "id": "clinic-fhir-r4",
        "url": f"{base}metadata",
        "name": "ClinicFhirServer",
        "title": "Clinic FHIR R4 server",
        "status": "active",
        "date": "2026-11-26",
        "publisher": "Clinic",
        "description": (
            "Read and search of the clinic's patients, appointments and clinical records; Patient $everything "
            f"and Bulk Data $export. The REST API's OpenAPI document: {origin}/api/v1/schema "
            f"(browsable at {origin}/api/v1/docs)."
        ),
        "kind": "instance",
        "software": {"name": "clinic", "version": SOFTWARE_VERSION},
        "implementation": {"description": "Clinic FHIR R4 server", "url": base.rstrip("/")},
        "fhirVersion": "4.0.1",
        "format": ["application/fhir+json", "json"],
        "rest": [
            {
                "mode": "server",
                "documentation": (
                    "OAuth 2.0 client credentials, the same tokens and scopes as the REST API "
                    f"({origin}/api/v1/auth/token; OpenAPI document {origin}/api/v1/schema). A client restricted "
                    "to some branches sees only their records. Unknown search parameters are refused (400) "
                    "unless the request says Prefer: handling=lenient. " + RESULT_PARAMETERS
                ),
                "security": {
                    "extension": [
                        {
                            "url": OAUTH_URIS,
                            "extension": [
                                {"url": "token", "valueUri": f"{origin}/api/v1/auth/token"},
                                {"url": "revoke", "valueUri": f"{origin}/api/v1/auth/revoke"},
                            ],
                        }
                    ],
                    "service": [
                        {
                            "coding": [
                                {
                                    "system": "http://terminology.hl7.org/CodeSystem/restful-security-service",
                                    "code": code,
                                }
                            ]
                        }
                        for code in ("OAuth", "SMART-on-FHIR")
                    ],
                    "description": "Bearer tokens from the client credentials grant: the client secret, or SMART "
                    f"Backend Services (a signed client assertion; {base}.well-known/smart-configuration).",
                },
                "resource": resources,
                "operation": [
                    {"name": "export", "definition": "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export"}
                ],
            }
        ],
    }

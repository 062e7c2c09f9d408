"""The FHIR R4 (4.0.1) server at /fhir/R4/ (docs/api-rules.md §15): read, search, $everything and bulk export
of the clinic's records, mapped from the owning apps' selectors (docs/fhir.md has the mapping table)."""

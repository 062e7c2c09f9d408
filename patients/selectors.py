"""Reads of patients, always through the calling client's branch restriction (visible_patients).

Search itself (query classification, the distinct-names dictionary, ranking) lives in patients.search;
patient_search() applies the client's restriction and the list filters to it and loads the page.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Greatest, Replace, Upper
from django.db.models.lookups import Exact
from django.utils import timezone

from clinic.errors import FieldError, NotFound
from clinic.lib.rows import loaded
from clinic.models import Branch
from clinic.text import has_non_ascii_digit, like_prefix
from clinic.visibility import BranchRestricted, client_branch_ids, client_sees_branch
from integrations.models import ApiClient
from patients.identifiers import normalise_patient_ref
from patients.models import Allergy, Diagnosis, Patient, Visit
from patients.search import SearchFilters
from patients.search import search as patient_search_ids


def visible_patients(client: BranchRestricted) -> QuerySet[Patient]:
    """Patients registered at the client's branches (Patient.objects.visible_to)."""
    return Patient.objects.visible_to(client)


def patient_get(*, client: BranchRestricted, ref: str) -> Patient:
    """By UUID or business patient_id; 404 when unknown or not visible (no existence oracle). A patient
    merged into another resolves to the record that survived (FHIR Patient.link "replaced-by"): ids an
    integrator kept keep working, and reads and writes reach the one current record."""
    patient = _patient_named(client, ref)
    if patient is not None and patient.merged_into_id is not None:
        patient = _patient_named(client, patient.merged_into_id)
    if patient is None:
        raise NotFound(f"No patient {ref!r}.")
    return patient


# Constant statements (docs/architecture.md §6): every booking, lab order, invoice, prescription and dispense
# names its patient, and composing this read through the ORM cost about 2 ms of CPU per request
# (bench/results/plans_retired.md). `Model.objects.raw()` builds the patient as a loaded row (the encrypted
# fields' converters included); the client's branch ids are the rule's parameter (Patient.objects.visible_to:
# registered at one of them). tests/patients/test_patient_statement.py holds them to the ORM reads they stand for.
@cache
def _patient_statements(kind: str, restricted: bool, profile: bool) -> str:
    """By `kind` ("id" or "key", the business id), limited to some branches or not, with the profile's
    annotations and branch or not. The table keeps its own name as alias, which _SECTIONS and _MERGED_IDS
    correlate to."""
    meta, branch_meta = Patient._meta, Branch._meta
    table = meta.db_table
    columns = [f'{table}."{field.column}"' for field in meta.concrete_fields]
    joins = ""
    if profile:
        columns += [f"({_SECTIONS}) AS sections", f"{_MERGED_IDS} AS merged_ids"]
        columns += [f'b."{field.column}" AS "{_BRANCH_COLUMN}{field.attname}"' for field in branch_meta.concrete_fields]
        joins = f' JOIN "{branch_meta.db_table}" b ON b.id = {table}."{meta.get_field("registration_branch").column}"'
    if kind == "id":
        where = f"{table}.id = %s"
    else:  # the expression of the business id's index (what _by_ref filters on), so the index answers it
        where = f"""UPPER(REPLACE({table}."{meta.get_field("patient_id").column}", '-', '')) = %s"""
    if restricted:
        where += f' AND {table}."{meta.get_field("registration_branch").column}" = ANY(%s)'
    first = " ORDER BY 1 LIMIT 1" if kind == "key" else ""
    return f'SELECT {", ".join(columns)} FROM "{table}"{joins} WHERE {where}{first}'  # noqa: S608 - from _meta


_BRANCH_COLUMN = "registration_branch__"


def _patient_named(
    client: BranchRestricted | None, ref: str | uuid.UUID, profile_day: date | None = None
) -> Patient | None:
    """The patient `ref` names before following a merge
    (UUID, else business patient_id; non-ASCII digits name nobody, as uuid.UUID would read Arabic-Indic
    digits as hex digits) when registered at a branch the client may see (None: any branch, for the event
    loaders). With `profile_day`, with the profile's small sections as of that day, the ids of the records
    merged into it and its branch."""
    kind: str
    value: Any
    if isinstance(ref, uuid.UUID):
        kind, value = "id", ref
    elif has_non_ascii_digit(ref):
        return None
    else:
        try:
            kind, value = "id", uuid.UUID(ref)
        except ValueError:
            kind, value = "key", normalise_patient_ref(ref)
    allowed = client_branch_ids(client) if client is not None else None
    params: list[Any] = [Diagnosis.Status.ACTIVE, profile_day] if profile_day is not None else []
    params += [value] if allowed is None else [value, list(allowed)]
    statement = _patient_statements(kind, allowed is not None, profile_day is not None)
    patient = next(iter(Patient.objects.raw(statement, params)), None)
    if patient is not None and profile_day is not None:
        values = [getattr(patient, f"{_BRANCH_COLUMN}{field.attname}") for field in Branch._meta.concrete_fields]
        patient.registration_branch = loaded(Branch, values)
    return patient


def patient_visible_get(*, client: ApiClient, ref: str) -> Patient:
    """A patient named by another domain's body or query (a lab order, an invoice, a prescription): as
    patient_get, with the message those bodies give on their patient_id field."""
    try:
        return patient_get(client=client, ref=ref)
    except NotFound:
        raise NotFound("No such patient available to this client.") from None


# id, type, start, end (UTC ISO strings), doctor id, doctor name, department, branch id, branch time zone,
# reason; ids as text.
VisitRow = tuple[str, str, str, str | None, str | None, str | None, str | None, str, str, str]


@dataclass(frozen=True)
class PatientProfile:
    """What the profile shows (see patient_profile). `sections` maps insurance, diagnoses, allergies and
    medications to their entries as JSON objects, keys in the contract's order and dates as ISO strings;
    `visits` holds one VisitRow per visit, newest first."""

    patient: Patient  # with registration_branch
    sections: dict[str, list[dict[str, Any]]]
    visits: list[VisitRow]


# The small sections as one JSON document, correlated to the patient row of the ORM query it annotates
# (the outer table keeps its own name as alias). Orders as the models' Meta.ordering; json (not jsonb)
# keeps each object's keys in the order written here. Clinical rows entered in error are left out; those
# of records merged into this patient are included (they stay on the merged record, never moved).
_OWN_AND_MERGED = """ANY(ARRAY(SELECT patients_patient.id UNION ALL
  SELECT merged.id FROM patients_patient merged WHERE merged.merged_into_id = patients_patient.id))"""
_SECTIONS = f"""
SELECT json_build_object(
  'insurance', (
    SELECT coalesce(json_agg(json_build_object(
      'provider', i.provider, 'policy_number', i.policy_number, 'valid_until', i.valid_until
    ) ORDER BY i.provider, i.id), '[]')
    FROM patients_insurance i WHERE i.patient_id = patients_patient.id),
  'diagnoses', (
    SELECT coalesce(json_agg(json_build_object(
      'code', d.code, 'system', d.system, 'description', d.description, 'onset_date', d.onset_date,
      'status', d.status
    ) ORDER BY d.onset_date DESC, d.id), '[]')
    FROM patients_diagnosis d
    WHERE d.patient_id = {_OWN_AND_MERGED} AND d.status = %s AND NOT d.entered_in_error),
  'allergies', (
    SELECT coalesce(json_agg(json_build_object(
      'substance', a.substance, 'reaction', a.reaction, 'severity', a.severity
    ) ORDER BY a.substance, a.id), '[]')
    FROM patients_allergy a WHERE a.patient_id = {_OWN_AND_MERGED} AND NOT a.entered_in_error),
  'medications', (
    SELECT coalesce(json_agg(json_build_object(
      'name', m.name, 'dosage', m.dosage, 'frequency', m.frequency, 'start_date', m.start_date
    ) ORDER BY m.start_date DESC, m.id), '[]')
    FROM patients_medication m
    WHERE m.patient_id = {_OWN_AND_MERGED} AND (m.end_date IS NULL OR m.end_date >= %s) AND NOT m.entered_in_error)
)::text
"""  # noqa: S608 - fixed SQL, no input
_MERGED_IDS = "ARRAY(SELECT merged.id FROM patients_patient merged WHERE merged.merged_into_id = patients_patient.id)"

# Plain rows, not model instances: a history of 500 visits loaded with select_related made 2,000
# instances, and Django's timestamp loader parses each value in Python; ids as text and UTC times in ISO
# form cost the API the least to format. Orders as Visit.Meta.ordering.
_VISITS = """
SELECT v.id::text, v.type,
  to_char(v.start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
  to_char(v."end" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
  v.doctor_id::text, doctor.name, department.name, v.branch_id::text, branch.time_zone, v.reason
FROM patients_visit v
LEFT JOIN clinic_doctor doctor ON doctor.id = v.doctor_id
LEFT JOIN clinic_department department ON department.id = v.department_id
JOIN clinic_branch branch ON branch.id = v.branch_id
WHERE v.patient_id {patients} AND NOT v.entered_in_error
ORDER BY v.start DESC, v.id
"""


def patient_profile(*, client: ApiClient, ref: str) -> PatientProfile:
    """A visible patient's profile in two statements whatever its size: the patient with its branch and
    its small sections (insurance, active diagnoses, allergies, current medications), then its visits.
    A merged patient's ref resolves to the surviving record (one more statement), as in patient_get."""
    return _profile(client, ref)


def patient_profile_load(*, patient_id: uuid.UUID) -> PatientProfile:
    """Any patient's profile, read as patient_profile reads it but under no client's restriction: what the
    patient events carry (their subscriptions filter by branch themselves)."""
    return _profile(None, patient_id)


def _profile(client: ApiClient | None, ref: str | uuid.UUID) -> PatientProfile:
    today = timezone.localdate()
    patient: Any = _patient_named(client, ref, today)
    if patient is not None and patient.merged_into_id is not None:
        patient = _patient_named(client, patient.merged_into_id, today)
    if patient is None:
        raise NotFound(f"No patient {ref!r}.")
    with connection.cursor() as cursor:
        if patient.merged_ids:  # one id keeps the index's order (no sort); merged records are rare
            cursor.execute(_VISITS.format(patients="= ANY(%s)"), [[patient.pk, *patient.merged_ids]])
        else:
            cursor.execute(_VISITS.format(patients="= %s"), [patient.pk])
        visits = cursor.fetchall()
    return PatientProfile(patient=patient, sections=json.loads(patient.sections), visits=visits)


def _last_visit_date() -> Greatest:
    """The latest visit not entered in error, the patient's own or of a record merged into it."""
    live = Visit.objects.filter(entered_in_error=False).order_by("-start").values("start")
    own = Subquery(live.filter(patient=OuterRef("pk"))[:1])
    merged = Subquery(live.filter(patient__merged_into=OuterRef("pk"))[:1])
    return Greatest(own, merged)  # PostgreSQL's GREATEST skips NULLs


def _summaries(patients: QuerySet[Patient]) -> QuerySet[Patient]:
    """`patients` with only what a list summary shows (api.serializers.patient_summary), their branch's time
    zone and their last visit."""
    fields = ("patient_id", "first_name", "last_name", "phone", "gender", "date_of_birth")
    return (
        patients.select_related("registration_branch")
        .only(*fields, "registration_branch__time_zone")
        .annotate(last_visit_at=_last_visit_date())
    )


def _list_branches(client: ApiClient, branch_id: uuid.UUID | None) -> list[uuid.UUID] | None:
    """The branches a list covers: the client's (None: every branch), narrowed to `branch_id`."""
    allowed = client_branch_ids(client)
    if branch_id is None:
        return None if allowed is None else sorted(allowed)
    return [branch_id] if client_sees_branch(client, branch_id) else []


def _registered_since(registered_after: date) -> datetime | None:
    """The first instant of the day after `registered_after` in the service's time zone: "registered
    after that date" as a range on registered_at, which the indexes serve (a cast of every row to a local
    date would not). None for the calendar's last days, after which nothing is registered (and whose
    bounds would overflow)."""
    if registered_after >= date.max - timedelta(days=2):
        return None
    following = registered_after + timedelta(days=1)
    return datetime.combine(following, time.min, tzinfo=timezone.get_default_timezone())


def _utc_midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


@dataclass(frozen=True)
class _Located:
    """Where row `offset` of a list lies: `before` rows are registered at or after `until` (None: no
    bound), so the page starts `offset - before` rows into those registered before it."""

    total: int
    before: int = 0
    until: datetime | None = None


# The list's total, and the UTC day holding row `offset`. Whole UTC days are summed from RegistrationCount;
# when `since` falls inside a UTC day, that first, partial day is counted through the order index. Filters
# left out are NULL, which the planner folds away (parameters are bound client-side).
_VISIBLE_COUNTS = """
  FROM patients_registrationcount
  WHERE day >= %(first_day)s AND (%(branches)s::uuid[] IS NULL OR branch_id = ANY(%(branches)s::uuid[]))
"""
_PARTIAL_DAY = """
  (SELECT count(*) FROM patients_patient
   WHERE registered_at >= %(since)s AND registered_at < %(first_day_start)s
   AND (%(branches)s::uuid[] IS NULL OR registration_branch_id = ANY(%(branches)s::uuid[])))
"""
_TOTAL = "SELECT (SELECT coalesce(sum(registered), 0)" + _VISIBLE_COUNTS + "), " + _PARTIAL_DAY
# The days are summed across branches once (a few thousand rows), then a running sum newest first stops
# at the day where it passes `offset`.
_TOTAL_AND_DAY = (
    "WITH days AS MATERIALIZED (SELECT day, sum(registered) AS registered"  # noqa: S608 - fixed SQL
    + _VISIBLE_COUNTS
    + "GROUP BY day) SELECT (SELECT coalesce(sum(registered), 0) FROM days), "
    + _PARTIAL_DAY
    + """, located.day, located.before
FROM (SELECT) one LEFT JOIN (
  SELECT day, (through - registered)::bigint AS before
  FROM (SELECT day, registered, sum(registered) OVER (ORDER BY day DESC) AS through FROM days) running
  WHERE through > %(offset)s ORDER BY day DESC LIMIT 1
) located ON TRUE
"""
)


def _locate(branches: list[uuid.UUID] | None, since: datetime | None, offset: int) -> _Located:
    """The list's total and where row `offset` lies, in one statement over RegistrationCount."""
    first_day, partial_day_end = date.min, None
    if since is not None:
        first_day = since.astimezone(UTC).date()
        if _utc_midnight(first_day) < since:
            first_day += timedelta(days=1)
            partial_day_end = _utc_midnight(first_day)
    params = {
        "branches": branches,
        "first_day": first_day,
        "since": since if partial_day_end else None,
        "first_day_start": partial_day_end,
        "offset": offset,
    }
    with connection.cursor() as cursor:
        if offset == 0:
            cursor.execute(_TOTAL, params)
            whole, partial = cursor.fetchone()
            return _Located(whole + partial)
        cursor.execute(_TOTAL_AND_DAY, params)
        whole, partial, day, before = cursor.fetchone()
    total = whole + partial
    if offset >= total:
        return _Located(total)
    if day is not None:
        return _Located(total, before, _utc_midnight(day + timedelta(days=1)))
    return _Located(total, whole, partial_day_end)  # row `offset` is in the partial first day


def patient_list(
    *,
    client: ApiClient,
    offset: int,
    limit: int,
    branch_id: uuid.UUID | None = None,
    registered_after: date | None = None,
    as_of: datetime | None = None,
) -> tuple[list[Patient], int]:
    """One page of visible patients, most recently registered first, and how many there are; with `as_of`,
    as the list stood then (patients registered later left out: the paging snapshot).

    Neither the total nor a deep page counts or skips every patient: both come from RegistrationCount
    (see _locate), and the page is read with an OFFSET within one day of registrations. Its ids come from
    the order index first, so the last visit is looked up for the page's rows only, not for skipped ones.
    Patients registered after `as_of` are the first rows of the newest-first order: they are counted (a
    short range of the registration index) and skipped, so the counters still give the rest."""
    branches = _list_branches(client, branch_id)
    if branches == []:
        return [], 0
    since = None
    if registered_after is not None:
        since = _registered_since(registered_after)
        if since is None:
            return [], 0
    rows = visible_patients(client)
    if branch_id is not None:
        rows = rows.filter(registration_branch_id=branch_id)
    if since is not None:
        rows = rows.filter(registered_at__gte=since)
    newer = rows.filter(registered_at__gt=as_of).count() if as_of is not None else 0
    located = _locate(branches, since, offset + newer)
    total = located.total - newer
    if offset >= total:
        return [], total
    if located.until is not None:
        rows = rows.filter(registered_at__lt=located.until)
    start = offset + newer - located.before
    page_ids = rows.order_by("-registered_at", "id").values("id")[start : start + limit]
    return list(_summaries(visible_patients(client)).filter(id__in=page_ids).order_by("-registered_at", "id")), total


def patient_search(
    *,
    client: ApiClient,
    search: str,
    offset: int,
    limit: int,
    branch_id: uuid.UUID | None = None,
    registered_after: date | None = None,
    as_of: datetime | None = None,
) -> tuple[list[Patient], int]:
    """One page of visible patients matching `search`, best first, and the number of matches; with `as_of`,
    patients registered after it left out (the paging snapshot)."""
    filters = SearchFilters(
        branch_ids=client_branch_ids(client),
        branch_id=branch_id,
        registered_after=registered_after,
        registered_until=as_of,
    )
    ids, total = patient_search_ids(search, filters, offset=offset, limit=limit)
    found = {patient.id: patient for patient in _summaries(visible_patients(client)).filter(id__in=ids)}
    return [found[patient_id] for patient_id in ids if patient_id in found], total


def patient_find(*, client: BranchRestricted, search: str, limit: int) -> tuple[list[Patient], int]:
    """The staff's "Find a patient": the API search engine's best `limit` candidates among visible patients,
    in its rank order, with their registration branch, and how many it matched (its cut-off included)."""
    filters = SearchFilters(branch_ids=client_branch_ids(client))
    ids, total = patient_search_ids(search, filters, offset=0, limit=limit)
    found = {p.id: p for p in visible_patients(client).filter(id__in=ids).select_related("registration_branch")}
    return [found[patient_id] for patient_id in ids if patient_id in found], total


def registration_branches(*, client: BranchRestricted) -> QuerySet[Branch]:
    """The open branches the client (a staff member) may register patients at."""
    return Branch.objects.visible_to(client).filter(is_active=True).order_by("code", "id")


def patient_possible_duplicates(
    *, client: BranchRestricted, phone: str, date_of_birth: date, exclude_id: uuid.UUID | None = None
) -> tuple[list[Patient], bool]:
    """Active patients registered with this phone and birth date (the duplicate rule's match): those the
    client may see, oldest first, and whether any is registered at a branch it may not see (named by nothing)."""
    same = Patient.objects.filter(phone=phone, date_of_birth=date_of_birth, is_active=True)
    if exclude_id is not None:
        same = same.exclude(id=exclude_id)
    visible = list(same.visible_to(client).select_related("registration_branch").order_by("registered_at", "id")[:20])
    allowed = client_branch_ids(client)
    hidden = allowed is not None and same.exclude(registration_branch_id__in=allowed).exists()
    return visible, hidden


def registration_branch_resolve(*, client: ApiClient, branch_id: uuid.UUID | None) -> Branch:
    """The branch a client registers a patient at: the one named (must be visible to the client and
    active); without one, the client's only branch, else its default registration branch, else the
    organisation's head office (docs/api-rules.md §9), so a body with exactly the specification's fields is
    accepted. A missing or invisible branch is a 400 on `branch_id`."""
    allowed = client_branch_ids(client)
    active = Branch.objects.visible_to(client).filter(is_active=True)
    if branch_id is None:
        if allowed is not None and len(allowed) == 1:
            return Branch.objects.visible_to(client).get()
        for candidate in (client.default_branch_id, _head_office_id()):
            branch = active.filter(id=candidate).first() if candidate is not None else None
            if branch is not None:
                return branch
        raise FieldError(
            {"branch_id": "Required: this client may register patients at more than one branch, and has no default."}
        )
    branch = active.filter(id=branch_id).first()
    if branch is None:
        raise FieldError({"branch_id": f"No branch {branch_id} available to this client."})
    return branch


def _head_office_id() -> uuid.UUID | None:
    return Branch.objects.filter(is_head_office=True).values_list("id", flat=True).first()


# --- Clinical rows for the standard channels (integrations.fhir) and the clinical record (emr) ---------------
# A row is visible when its patient is; visits also carry the branch where they happened, and a client limited
# to some branches sees only the visits of those. Rows entered in error are left out (docs/api-rules.md §7).


def visible_visits(client: ApiClient) -> QuerySet[Visit]:
    return Visit.objects.visible_to(client).filter(entered_in_error=False)


def visible_diagnoses(client: ApiClient) -> QuerySet[Diagnosis]:
    return Diagnosis.objects.visible_to(client).filter(entered_in_error=False)


def visible_allergies(client: ApiClient) -> QuerySet[Allergy]:
    return Allergy.objects.visible_to(client).filter(entered_in_error=False)


# --- Conditions the FHIR search asks of a record's rows (integrations.fhir.registry) ---------------------------


@dataclass(frozen=True)
class Span:
    """[start, end) of instants (or of dates, on a date column), either end open; `outside` for everything
    else. What a FHIR date parameter with a prefix asks of a column, said in the selectors' own terms: the
    apps' FHIR filters (lab.selectors.ResultFilter and the like) take Spans, never FHIR syntax."""

    start: datetime | date | None = None
    end: datetime | date | None = None
    outside: bool = False

    def on(self, column: str) -> Q:
        within = Q()
        if self.start is not None:
            within &= Q(**{f"{column}__gte": self.start})
        if self.end is not None:
            within &= Q(**{f"{column}__lt": self.end})
        return ~within if self.outside else within


def any_of(column: str, values: tuple[Any, ...] | None) -> Q:
    """`column` is one of `values`; no condition when `values` is None (the filter does not ask). One value
    is an equality, the SQL the searches were tuned with (docs/fhir.md, measured at 1M patients)."""
    if values is None:
        return Q()
    if len(values) == 1:
        return Q(**{column: values[0]})
    return Q(**{f"{column}__in": values})


def any_span(column: str, spans: tuple[Span, ...] | None) -> Q:
    """`column` falls in any of `spans` (OR); no condition when None."""
    conditions = [span.on(column) for span in spans or ()]
    if spans is None or any(not condition for condition in conditions):
        return Q()  # an unbounded span is every row (and Django's `|` would drop an empty Q)
    combined = Q(pk__in=[])
    for condition in conditions:
        combined |= condition
    return combined


# What a FHIR search asks of the record's rows (Patient, Encounter, Condition, AllergyIntolerance). A filter
# is one search parameter's alternatives in the app's own terms: each field given narrows to the rows
# matching one of its values (None does not narrow); the search ANDs its filters.

# The distinct full names holding a word that starts with the value: through the dictionary of name words
# (a few thousand rows at a million patients, kept by triggers; patients.search explains the tables), then
# the patients through the (search_name, registered_at) index. A trigram regex over search_name finds the
# same patients, but must visit each one's heap row; the words are read index-only.
_NAMES_WITH_WORD = (
    "SELECT part.name FROM patients_namepart part JOIN patients_nameword word ON word.word = part.word "
    "WHERE word.word LIKE %s"
)


@dataclass(frozen=True)
class PatientFilter:
    """`name_starts`: a name part starting with the text (several words: from a word start, in order);
    `patient_refs` normalised (normalise_patient_ref), `abha_numbers` 14 digits, `phone_tails` digits."""

    ids: tuple[uuid.UUID, ...] | None = None
    has_abha: bool | None = None
    abha_numbers: tuple[str, ...] | None = None
    patient_refs: tuple[str, ...] | None = None
    name_starts: tuple[str, ...] | None = None
    name_contains: tuple[str, ...] | None = None
    name_exact: tuple[str, ...] | None = None
    born: tuple[Span, ...] | None = None
    genders: tuple[str, ...] | None = None
    phone_tails: tuple[str, ...] | None = None
    updated: tuple[Span, ...] | None = None


def _name_starts(text: str) -> Q:
    words = text.strip().lower().split()
    if not words:
        return Q()
    if len(words) > 1:
        return Q(search_name__regex=r"(^| )" + re.escape(" ".join(words)))  # patient_name_trgm
    return Q(search_name__in=RawSQL(_NAMES_WITH_WORD, [like_prefix(words[0])]))  # noqa: S611 - fixed SQL


def _each(values: tuple[str, ...] | None, condition: Any) -> Q:
    if values is None:
        return Q()
    found = [condition(value) for value in values]
    if any(not part for part in found):
        return Q()
    combined = Q(pk__in=[])
    for part in found:
        combined |= part
    return combined


def patient_condition(where: PatientFilter) -> Q:
    has_abha = Q() if where.has_abha is None else Q(national_health_id__isnull=not where.has_abha)
    refs = Q()
    if where.patient_refs is not None:
        refs = Q(Exact(Upper(Replace("patient_id", Value("-"), Value(""))), where.patient_refs[0]))
        for ref in where.patient_refs[1:]:
            refs |= Q(Exact(Upper(Replace("patient_id", Value("-"), Value(""))), ref))
    return (
        any_of("pk", where.ids)
        & has_abha
        & any_of("national_health_id", where.abha_numbers)
        & refs
        & _each(where.name_starts, _name_starts)
        & _each(where.name_contains, lambda text: Q(search_name__contains=text.strip().lower()))
        & _each(where.name_exact, lambda text: Q(first_name=text) | Q(last_name=text) | Q(search_name=text.lower()))
        & any_span("date_of_birth", where.born)
        & any_of("gender", where.genders)
        & _each(where.phone_tails, lambda digits: Q(phone_digits_reversed__startswith=digits[::-1]))
        & any_span("updated_at", where.updated)
    )


@dataclass(frozen=True)
class VisitFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    doctor_ids: tuple[uuid.UUID, ...] | None = None
    types: tuple[str, ...] | None = None
    started: tuple[Span, ...] | None = None
    updated: tuple[Span, ...] | None = None


def visit_condition(where: VisitFilter) -> Q:
    return (
        any_of("pk", where.ids)
        & any_of("patient_id", where.patient_ids)
        & any_of("doctor_id", where.doctor_ids)
        & any_of("type", where.types)
        & any_span("start", where.started)
        & any_span("updated_at", where.updated)
    )


@dataclass(frozen=True)
class DiagnosisFilter:
    """`icd10`: True for the ICD-10 rows (however the row spells "ICD-10"), False for the others, whose
    `systems` are the rows' own system names."""

    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    statuses: tuple[str, ...] | None = None
    codes: tuple[str, ...] | None = None
    icd10: bool | None = None
    systems: tuple[str, ...] | None = None
    onset: tuple[Span, ...] | None = None
    updated: tuple[Span, ...] | None = None


def diagnosis_condition(where: DiagnosisFilter) -> Q:
    is_icd10 = Q(Exact(Upper(Replace("system", Value("-"), Value(""))), "ICD10"))
    icd10 = Q() if where.icd10 is None else is_icd10 if where.icd10 else ~is_icd10
    return (
        any_of("pk", where.ids)
        & any_of("patient_id", where.patient_ids)
        & any_of("status", where.statuses)
        & any_of("code", where.codes)
        & icd10
        & any_of("system", where.systems)
        & any_span("onset_date", where.onset)
        & any_span("updated_at", where.updated)
    )


@dataclass(frozen=True)
class AllergyFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    updated: tuple[Span, ...] | None = None


def allergy_condition(where: AllergyFilter) -> Q:
    return any_of("pk", where.ids) & any_of("patient_id", where.patient_ids) & any_span("updated_at", where.updated)

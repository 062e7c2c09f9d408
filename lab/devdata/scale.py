"""Scale data (issue 16): a lab and imaging catalogue and two years of lab orders with their items, results and
number counters, loaded with COPY.

About one order per completed appointment (ordered during the visit, by its doctor, at its branch), plus one
in five more without an appointment (a doctor's order sent straight to the lab). An order holds one to three
tests: 3-20 analyte results for lab orders, one report for imaging orders. Orders of the last two days are
still at every stage of the workflow; older ones are final, about 2 % were cancelled before collection and
about 1 % of final results were amended once (both versions kept).

Valid by construction, as the services would have written it: order and accession numbers are gap-free per
branch and calendar year in creation order (counter rows end at the last number); flags and reference limits
come from lab.interpretation, for the patient's sex and age on the day of collection; item and order statuses
follow lab.results' rules. Lab rows use a random.Random of their own, so the rows of the other apps are the
same for a seed with or without them.
"""

from __future__ import annotations

import random
import zoneinfo
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from appointments.devdata.scale import CompletedAppointment
from clinic.devdata.scale import Organisation, Timings, copy_rows, rng_uuid
from lab import interpretation
from lab.models import CRITICAL_FLAGS, ItemStatus, OrderStatus, ResultStatus, TestKind
from lab.numbering import format_accession_number, format_order_number
from patients.devdata.scale import Patients

ADULT = 18 * 365
CHILD = 365
ZONE = zoneinfo.ZoneInfo("Asia/Kolkata")  # every generated branch's time zone (clinic.devdata.scale)
ORDERS_PER_CHUNK = 20_000
IN_FLIGHT_DAYS = 2  # orders younger than this are still at every stage
EXTRA_ORDERS = 0.2  # orders without an appointment, per completed appointment
CANCELLED = 0.02
AMENDED = 0.01
PERFORMERS = ["Lab tech R. Iyer", "Lab tech S. Khan", "Lab tech M. Das", "Dr. P. Menon (pathologist)"]
RADIOLOGISTS = ["Dr. A. Rao (radiologist)", "Dr. F. Sheikh (radiologist)"]
REPORTS = [
    "No acute abnormality.",
    "Findings within normal limits for age.",
    "Mild degenerative changes; no acute abnormality.",
    "Small focal opacity; clinical correlation and follow-up advised.",
]
CANCEL_REASONS = ["Ordered in error", "Patient declined", "Duplicate order", "Sample not obtained"]
NOTES = ["", "", "", "Fasting sample", "Follow-up of earlier result", "On treatment; monitor"]


@dataclass(frozen=True, slots=True)
class Band:
    sex: str
    age_min_days: int
    age_max_days: int | None
    low: Decimal | None
    high: Decimal | None


@dataclass(frozen=True)
class ScaleAnalyte:
    code: str
    loinc_code: str
    name: str
    unit: str = ""
    value_type: str = "quantity"
    coded_values: tuple[str, ...] = ()
    critical_low: Decimal | None = None
    critical_high: Decimal | None = None
    ranges: tuple[Band, ...] = ()
    typical: tuple[float, float] = (1.0, 0.1)  # centre and spread of generated values
    places: int = 1


@dataclass(frozen=True)
class ScaleTest:
    code: str
    name: str
    loinc_code: str
    kind: str
    specimen_type: str = ""
    modality: str = ""
    analytes: tuple[ScaleAnalyte, ...] = ()


def _d(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def _adult(low: str | None, high: str | None, sex: str = "any") -> Band:
    return Band(sex, ADULT, None, _d(low), _d(high))


def _q(
    code: str,
    loinc: str,
    name: str,
    unit: str,
    typical: tuple[float, float],
    ranges: tuple[Band, ...],
    critical: tuple[str | None, str | None] = (None, None),
    places: int = 1,
) -> ScaleAnalyte:
    return ScaleAnalyte(
        code, loinc, name, unit, "quantity", (), _d(critical[0]), _d(critical[1]), ranges, typical, places
    )


CATALOGUE: tuple[ScaleTest, ...] = (
    ScaleTest("CBC", "Complete blood count", "58410-2", TestKind.LAB, specimen_type="Whole blood (EDTA)", analytes=(
        _q("HGB", "718-7", "Hemoglobin", "g/dL", (13.5, 1.8), (
            Band("any", CHILD, ADULT, _d("11.5"), _d("15.5")), _adult("13.5", "17.5", "male"),
            _adult("12.0", "15.5", "female")), ("7", "20")),
        _q("WBC", "6690-2", "Leukocytes", "10*3/uL", (7.5, 2.2), (
            Band("any", CHILD, ADULT, _d("5.0"), _d("14.5")), _adult("4.0", "11.0")), ("2", "30")),
        _q("PLT", "777-3", "Platelets", "10*3/uL", (280, 80), (Band("any", CHILD, None, _d("150"), _d("450")),),
           ("50", "1000"), places=0),
        _q("HCT", "4544-3", "Hematocrit", "%", (42, 4.5), (
            Band("any", CHILD, ADULT, _d("35"), _d("45")), _adult("41", "53", "male"), _adult("36", "46", "female")),
           ("20", "60")),
        _q("RBC", "789-8", "Erythrocytes", "10*6/uL", (4.8, 0.5), (_adult("4.5", "5.9", "male"),
                                                                    _adult("4.1", "5.1", "female")), places=2),
        _q("MCV", "787-2", "MCV", "fL", (88, 6), (_adult("80", "100"),)),
        _q("MCH", "785-6", "MCH", "pg", (29.5, 2.2), (_adult("27", "33"),)),
        _q("MCHC", "786-4", "MCHC", "g/dL", (33.5, 1.1), (_adult("32", "36"),)),
    )),
    ScaleTest("LIPID", "Lipid panel", "57698-3", TestKind.LAB, specimen_type="Serum", analytes=(
        _q("CHOL", "2093-3", "Cholesterol", "mg/dL", (185, 35), (_adult(None, "200"),), places=0),
        _q("TRIG", "2571-8", "Triglyceride", "mg/dL", (140, 55), (_adult(None, "150"),), (None, "1000"), places=0),
        _q("HDL", "2085-9", "Cholesterol in HDL", "mg/dL", (48, 11), (_adult("40", None, "male"),
                                                                      _adult("50", None, "female")), places=0),
        _q("LDL", "13457-7", "Cholesterol in LDL (calculated)", "mg/dL", (110, 30), (_adult(None, "100"),), places=0),
    )),
    ScaleTest("CMP", "Comprehensive metabolic panel", "24323-8", TestKind.LAB, specimen_type="Serum", analytes=(
        _q("GLU", "2345-7", "Glucose", "mg/dL", (100, 25), (_adult("70", "99"),), ("40", "500"), places=0),
        _q("BUN", "3094-0", "Urea nitrogen", "mg/dL", (14, 5), (_adult("7", "20"),), places=0),
        _q("CREA", "2160-0", "Creatinine", "mg/dL", (0.95, 0.25), (_adult("0.7", "1.3", "male"),
                                                                   _adult("0.6", "1.1", "female")), (None, "10"), 2),
        _q("NA", "2951-2", "Sodium", "mmol/L", (139, 3), (_adult("135", "145"),), ("120", "160"), places=0),
        _q("K", "2823-3", "Potassium", "mmol/L", (4.3, 0.45), (_adult("3.5", "5.1"),), ("2.5", "6.5")),
        _q("CL", "2075-0", "Chloride", "mmol/L", (102, 3), (_adult("98", "107"),), places=0),
        _q("CO2", "2028-9", "Carbon dioxide", "mmol/L", (25, 2.5), (_adult("22", "29"),), places=0),
        _q("CA", "17861-6", "Calcium", "mg/dL", (9.4, 0.45), (_adult("8.6", "10.3"),), ("6", "13")),
        _q("TP", "2885-2", "Protein", "g/dL", (7.0, 0.5), (_adult("6.4", "8.3"),)),
        _q("ALB", "1751-7", "Albumin", "g/dL", (4.2, 0.4), (_adult("3.5", "5.2"),)),
        _q("TBIL", "1975-2", "Bilirubin", "mg/dL", (0.7, 0.35), (_adult("0.1", "1.2"),), places=2),
        _q("ALP", "6768-6", "Alkaline phosphatase", "U/L", (85, 28), (_adult("44", "147"),), places=0),
        _q("AST", "1920-8", "AST", "U/L", (26, 10), (_adult("10", "40"),), places=0),
        _q("ALT", "1742-6", "ALT", "U/L", (28, 13), (_adult("7", "56"),), places=0),
    )),
    ScaleTest("THYROID", "Thyroid panel", "24348-5", TestKind.LAB, specimen_type="Serum", analytes=(
        _q("TSH", "3016-3", "Thyrotropin", "m[IU]/L", (2.2, 1.2), (_adult("0.4", "4.0"),), places=2),
        _q("FT4", "3024-7", "Thyroxine (free)", "ng/dL", (1.25, 0.22), (_adult("0.8", "1.8"),), places=2),
        _q("FT3", "3051-0", "Triiodothyronine (free)", "pg/mL", (3.1, 0.45), (_adult("2.3", "4.2"),), places=2),
    )),
    ScaleTest("HBA1C", "Hemoglobin A1c", "4548-4", TestKind.LAB, specimen_type="Whole blood (EDTA)", analytes=(
        _q("HBA1C", "4548-4", "Hemoglobin A1c", "%", (5.9, 0.9), (_adult("4.0", "5.6"),)),
    )),
    ScaleTest("GLU-F", "Glucose, fasting", "1558-6", TestKind.LAB, specimen_type="Plasma (fluoride)", analytes=(
        _q("GLU", "1558-6", "Fasting glucose", "mg/dL", (98, 22), (_adult("70", "99"),), ("40", "500"), places=0),
    )),
    ScaleTest("BLOOD-GROUP", "ABO and Rh blood group", "882-1", TestKind.LAB, specimen_type="Whole blood (EDTA)",
              analytes=(
        ScaleAnalyte("ABO", "883-9", "ABO group", value_type="coded", coded_values=("A", "B", "AB", "O")),
        ScaleAnalyte("RH", "10331-7", "Rh type", value_type="coded", coded_values=("Positive", "Negative")),
    )),
    ScaleTest("XR-CHEST", "XR Chest 2 views", "36643-5", TestKind.IMAGING, modality="XR"),
    ScaleTest("CT-CHEST", "CT Chest", "24627-2", TestKind.IMAGING, modality="CT"),
    ScaleTest("US-ABD", "US Abdomen", "24558-9", TestKind.IMAGING, modality="US"),
    ScaleTest("MR-BRAIN", "MR Brain", "24590-2", TestKind.IMAGING, modality="MR"),
)  # fmt: skip

# What one order holds (test codes) and how often: 3-20 results for a lab order, one report for imaging.
COMBINATIONS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("CBC",), 30),
    (("LIPID",), 12),
    (("CMP",), 8),
    (("THYROID",), 8),
    (("HBA1C", "GLU-F", "LIPID"), 6),
    (("CBC", "LIPID"), 8),
    (("CMP", "THYROID"), 4),
    (("CMP", "LIPID", "HBA1C", "GLU-F"), 2),
    (("BLOOD-GROUP", "CBC"), 3),
    (("HBA1C", "GLU-F", "THYROID"), 5),
    (("XR-CHEST",), 9),
    (("CT-CHEST",), 3),
    (("US-ABD",), 3),
    (("MR-BRAIN",), 1),
)
PRIORITIES = ("routine", "urgent", "stat")
PRIORITY_WEIGHTS = (85, 12, 3)


@dataclass
class _Catalogue:
    test_ids: dict[str, Any] = field(default_factory=dict)
    tests: dict[str, ScaleTest] = field(default_factory=dict)
    analyte_ids: dict[tuple[str, str], Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Order:
    created: datetime
    branch: int
    patient: int
    doctor: int
    appointment: Any
    combination: int
    priority: str


def generate_lab_catalogue(rng: random.Random, *, moment: datetime, timings: Timings) -> _Catalogue:
    """The tests of CATALOGUE with their analytes and reference ranges (no billing items: scale orders are not
    billed)."""
    catalogue = _Catalogue()
    tests: list[tuple[Any, ...]] = []
    analytes: list[tuple[Any, ...]] = []
    ranges: list[tuple[Any, ...]] = []
    for spec in CATALOGUE:
        test_id = rng_uuid(rng)
        catalogue.test_ids[spec.code], catalogue.tests[spec.code] = test_id, spec
        tests.append(
            (test_id, spec.code, spec.name, spec.loinc_code, spec.kind, spec.specimen_type, spec.modality, None,
             True, moment, moment)
        )  # fmt: skip
        for position, analyte in enumerate(spec.analytes):
            analyte_id = rng_uuid(rng)
            catalogue.analyte_ids[spec.code, analyte.code] = analyte_id
            analytes.append(
                (analyte_id, test_id, position, analyte.code, analyte.loinc_code, analyte.name, analyte.unit,
                 analyte.value_type, list(analyte.coded_values), analyte.critical_low, analyte.critical_high)
            )  # fmt: skip
            ranges.extend(
                (rng_uuid(rng), analyte_id, b.sex, b.age_min_days, b.age_max_days, b.low, b.high)
                for b in analyte.ranges
            )
    copy_rows(
        "lab_labtest",
        ["id", "code", "name", "loinc_code", "kind", "specimen_type", "modality", "billable_service_id", "active",
         "created_at", "updated_at"],
        tests,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "lab_analyte",
        ["id", "test_id", "position", "code", "loinc_code", "name", "unit", "value_type", "coded_values",
         "critical_low", "critical_high"],
        analytes,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "lab_referencerange",
        ["id", "analyte_id", "sex", "age_min_days", "age_max_days", "low", "high"],
        ranges,
        timings=timings,
    )
    return catalogue


def _plan(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    completed: Sequence[CompletedAppointment],
    now: datetime,
) -> list[_Order]:
    """The orders, before numbering: one per completed appointment during the visit, and EXTRA_ORDERS more."""
    combination_weights = [w for _, w in COMBINATIONS]
    orders: list[_Order] = []
    for visit in completed:
        created = visit.checked_in + (visit.completed - visit.checked_in) * rng.random()
        combination = rng.choices(range(len(COMBINATIONS)), weights=combination_weights)[0]
        priority = rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0]
        orders.append(_Order(created, visit.branch, visit.patient, visit.doctor, visit.id, combination, priority))
    doctors_at: dict[int, list[int]] = defaultdict(list)
    for index, doctor in enumerate(organisation.doctors):
        for branch in doctor.branch_indexes:
            doctors_at[branch].append(index)
    extra = int(len(completed) * EXTRA_ORDERS)
    for _ in range(extra):
        patient = rng.randrange(len(patients.ids))
        branch = patients.branch_indexes[patient]
        if not doctors_at[branch]:
            continue
        first = max(
            datetime.combine(patients.registered_days[patient], datetime.min.time(), tzinfo=UTC),
            now - timedelta(days=700),
        )
        span = (now - first).total_seconds()
        if span <= 0:
            continue
        created = first + timedelta(seconds=rng.uniform(0, span))
        combination = rng.choices(range(len(COMBINATIONS)), weights=combination_weights)[0]
        priority = rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0]
        orders.append(_Order(created, branch, patient, rng.choice(doctors_at[branch]), None, combination, priority))
    # Numbers follow creation order per branch and year; rows go in the same order.
    orders.sort(key=lambda o: (o.branch, o.created))
    return [o for o in orders if o.created < now]


def _value(rng: random.Random, analyte: ScaleAnalyte) -> Decimal:
    """A plausible value: mostly around the analyte's typical centre, now and then far out (critical)."""
    centre, spread = analyte.typical
    roll = rng.random()
    if roll < 0.002 and analyte.critical_high is not None:
        x = float(analyte.critical_high) * rng.uniform(1.05, 1.5)
    elif roll < 0.004 and analyte.critical_low is not None:
        x = float(analyte.critical_low) * rng.uniform(0.5, 0.95)
    else:
        x = rng.gauss(centre, spread)
    return round(Decimal(max(x, 0.0)), analyte.places)


@dataclass
class _Counters:
    orders: dict[tuple[Any, int], int] = field(default_factory=dict)
    accessions: dict[tuple[Any, int], int] = field(default_factory=dict)


def generate_lab_orders(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    completed: Sequence[CompletedAppointment],
    catalogue: _Catalogue,
    today: date,
    timings: Timings,
) -> dict[str, int]:
    """Orders, items and results in chunks of ORDERS_PER_CHUNK orders, then the two counters."""
    now = datetime.combine(today, datetime.min.time(), tzinfo=ZONE).astimezone(UTC) + timedelta(hours=6)
    plan = _plan(rng, organisation=organisation, patients=patients, completed=completed, now=now)
    counters = _Counters()
    totals = {"orders": 0, "items": 0, "results": 0, "amended": 0, "cancelled": 0}
    for start in range(0, len(plan), ORDERS_PER_CHUNK):
        orders: list[tuple[Any, ...]] = []
        items: list[tuple[Any, ...]] = []
        results: list[tuple[Any, ...]] = []
        for order in plan[start : start + ORDERS_PER_CHUNK]:
            _order_rows(rng, order, organisation, patients, catalogue, counters, now, orders, items, results, totals)
        copy_rows("lab_laborder", ORDER_COLUMNS, orders, timings=timings)
        copy_rows("lab_laborderitem", ITEM_COLUMNS, items, timings=timings)
        copy_rows("lab_labresult", RESULT_COLUMNS, results, timings=timings)
    for table, series in (("lab_labordercounter", counters.orders), ("lab_accessioncounter", counters.accessions)):
        copy_rows(
            table,
            ["branch_id", "year", "last_number"],
            [(branch_id, year, last) for (branch_id, year), last in series.items()],
            timings=timings,
        )
    return totals


ORDER_COLUMNS = [
    "id", "branch_id", "patient_id", "doctor_id", "appointment_id", "order_number", "priority", "clinical_notes",
    "status", "invoice_id", "ordered_by", "collected_at", "cancelled_at", "cancellation_reason", "created_at",
    "updated_at",
]  # fmt: skip
ITEM_COLUMNS = ["id", "order_id", "position", "test_id", "accession_number", "status"]
RESULT_COLUMNS = [
    "id", "item_id", "analyte_id", "version", "current", "status", "value_quantity", "value_text", "unit", "flag",
    "reference_low", "reference_high", "note", "reason", "performed_at", "performer", "recorded_at", "recorded_by",
    "critical_acknowledged_at", "critical_acknowledged_by",
]  # fmt: skip
# A critical value is told to the doctor and acknowledged before it is verified (lab.review), so every final or
# amended critical result carries its acknowledgement, at its recording; preliminary ones may still await it.
# Without this, two years of history would fill the unacknowledged list (lab 0010 did the same to real data).
ACKNOWLEDGED_BY = "staff:lab"


def _stage(rng: random.Random, order: _Order, now: datetime) -> str:
    """How far the order got: older ones are final (or cancelled); the last IN_FLIGHT_DAYS' are anywhere."""
    if rng.random() < CANCELLED:
        return OrderStatus.CANCELLED
    if now - order.created > timedelta(days=IN_FLIGHT_DAYS):
        return OrderStatus.FINAL
    return rng.choice([OrderStatus.ORDERED, OrderStatus.COLLECTED, OrderStatus.RESULTED, OrderStatus.FINAL])


def _order_rows(
    rng: random.Random,
    order: _Order,
    organisation: Organisation,
    patients: Patients,
    catalogue: _Catalogue,
    counters: _Counters,
    now: datetime,
    orders: list[tuple[Any, ...]],
    items: list[tuple[Any, ...]],
    results: list[tuple[Any, ...]],
    totals: dict[str, int],
) -> None:
    branch = organisation.branches[order.branch]
    year = order.created.astimezone(ZONE).year
    key = (branch.id, year)
    number = counters.orders[key] = counters.orders.get(key, 0) + 1
    codes = COMBINATIONS[order.combination][0]
    imaging = catalogue.tests[codes[0]].kind == TestKind.IMAGING
    status = _stage(rng, order, now)
    if imaging and status == OrderStatus.COLLECTED:
        status = OrderStatus.ORDERED  # imaging items are scheduled, never collected
    collected = cancelled = None
    reason, updated = "", order.created
    if status == OrderStatus.CANCELLED:
        cancelled = updated = order.created + timedelta(minutes=rng.randint(5, 240))
        reason = rng.choice(CANCEL_REASONS)
        totals["cancelled"] += 1
    elif status != OrderStatus.ORDERED and not imaging:
        collected = updated = max(order.created, min(order.created + timedelta(minutes=rng.randint(5, 90)), now))
    order_id = rng_uuid(rng)
    performed = (collected or order.created) + timedelta(minutes=rng.randint(30, 600))
    performed = max(collected or order.created, min(performed, now))
    collection_day = (collected or performed).astimezone(ZONE).date()
    sex, birth = patients.genders[order.patient], patients.birth_dates[order.patient]
    age_days = max(0, interpretation.age_in_days(birth, collection_day))
    item_status_done = ItemStatus.COMPLETED if imaging else ItemStatus.FINAL
    results_start = len(results)
    for position, code in enumerate(codes):
        accession = counters.accessions[key] = counters.accessions.get(key, 0) + 1
        item_id = rng_uuid(rng)
        spec = catalogue.tests[code]
        if status == OrderStatus.CANCELLED:
            item_status = ItemStatus.CANCELLED
        elif status in (OrderStatus.ORDERED, OrderStatus.COLLECTED):
            item_status = (
                ItemStatus.SCHEDULED if imaging else (ItemStatus.ORDERED if collected is None else ItemStatus.COLLECTED)
            )
        elif status == OrderStatus.RESULTED and position == 0:
            item_status = ItemStatus.IN_PROGRESS if imaging else ItemStatus.RESULTED
        else:
            item_status = item_status_done
        items.append((item_id, order_id, position, catalogue.test_ids[code], format_accession_number(
            branch.code, year, accession), item_status))  # fmt: skip
        if item_status in (ItemStatus.ORDERED, ItemStatus.COLLECTED, ItemStatus.SCHEDULED, ItemStatus.CANCELLED):
            continue
        result_status = (
            ResultStatus.PRELIMINARY
            if item_status in (ItemStatus.RESULTED, ItemStatus.IN_PROGRESS)
            else ResultStatus.FINAL
        )
        if imaging:
            results.append(_result_row(rng, item_id, None, 1, True, result_status, None, rng.choice(REPORTS), "",
                                       None, performed, rng.choice(RADIOLOGISTS), ""))  # fmt: skip
            continue
        performer = rng.choice(PERFORMERS)
        for analyte in spec.analytes:
            analyte_id = catalogue.analyte_ids[code, analyte.code]
            amend = result_status == ResultStatus.FINAL and rng.random() < AMENDED
            if amend:
                first = _analyte_result(rng, item_id, analyte_id, analyte, 1, False, ResultStatus.FINAL, sex, age_days,
                                        performed, performer, "")  # fmt: skip
                results.append(first)
                results.append(_analyte_result(rng, item_id, analyte_id, analyte, 2, True, ResultStatus.AMENDED, sex,
                                               age_days, min(performed + timedelta(hours=rng.randint(2, 30)), now), performer,
                                               "Transcription error corrected"))  # fmt: skip
                totals["amended"] += 1
            else:
                results.append(_analyte_result(rng, item_id, analyte_id, analyte, 1, True, result_status, sex, age_days,
                                               performed, performer, ""))  # fmt: skip
    if len(results) > results_start:
        updated = max(row[16] for row in results[results_start:])
    orders.append(
        (order_id, branch.id, patients.ids[order.patient], organisation.doctors[order.doctor].id, order.appointment,
         format_order_number(branch.code, year, number), order.priority, rng.choice(NOTES), status, None,
         "api:his" if order.appointment is None else "staff:doctor", collected, cancelled, reason, order.created,
         updated)
    )  # fmt: skip
    totals["orders"] += 1
    totals["items"] += len(codes)
    totals["results"] += len(results) - results_start


def _analyte_result(
    rng: random.Random,
    item_id: Any,
    analyte_id: Any,
    analyte: ScaleAnalyte,
    version: int,
    current: bool,
    status: str,
    sex: str,
    age_days: int,
    performed: datetime,
    performer: str,
    reason: str,
) -> tuple[Any, ...]:
    if analyte.value_type == "coded":
        return _result_row(rng, item_id, analyte_id, version, current, status, None, rng.choice(analyte.coded_values),
                           "", None, performed, performer, reason)  # fmt: skip
    value = _value(rng, analyte)
    band = interpretation.reference_range_for(analyte.ranges, sex=sex, age_days=age_days)
    flag = interpretation.interpret(
        value, range=band, critical_low=analyte.critical_low, critical_high=analyte.critical_high
    )
    return _result_row(rng, item_id, analyte_id, version, current, status, value, "", analyte.unit, band, performed,
                       performer, reason, flag)  # fmt: skip


def _result_row(
    rng: random.Random,
    item_id: Any,
    analyte_id: Any,
    version: int,
    current: bool,
    status: str,
    quantity: Decimal | None,
    text: str,
    unit: str,
    band: Band | None,
    performed: datetime,
    performer: str,
    reason: str,
    flag: str = "",
) -> tuple[Any, ...]:
    recorded = performed + timedelta(minutes=rng.randint(1, 20))
    acknowledged = flag in CRITICAL_FLAGS and status in (ResultStatus.FINAL, ResultStatus.AMENDED)
    return (
        rng_uuid(rng), item_id, analyte_id, version, current, status, quantity, text, unit, flag,
        band.low if band else None, band.high if band else None, "", reason, performed, performer, recorded,
        "api:lis", recorded if acknowledged else None, ACKNOWLEDGED_BY if acknowledged else "",
    )  # fmt: skip

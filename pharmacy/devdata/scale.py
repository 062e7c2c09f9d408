"""Scale data (issue 17): a drug catalogue, batches at every branch and two years of prescriptions and
dispenses, loaded with COPY through the stock ledger.

- 2,000 drugs (by default) of every schedule and form, each stocked at 70-85 % of the branches, most with a
  reorder level there; demand follows a long tail (a few drugs make most of the dispenses).
- Prescriptions: about three in four completed appointments, written during the visit by its doctor, one to
  four drugs each; each item is also a medication in the patient's profile for its course, as
  pharmacy.services.prescription_create writes it. About 1 % are cancelled before anything is dispensed.
- Dispenses: nine in ten prescriptions are dispensed within the hour after the visit (one in ten of those
  only in part, so the prescription stays active), plus over-the-counter sales of OTC drugs (a quarter per
  completed appointment): about one dispense per completed appointment in all.
- Stock moves only through the ledger, as in production: every batch is inserted empty and filled by its
  receipt movement; dispenses take first expiry first out from the batches received before them, never
  from an expired one, and a branch receives a new batch when the ones it holds run short, so the batch
  CHECK (on-hand >= 0) never fires. Batches that expired holding stock more than a month ago were written
  off; younger ones still await it. Schedule H1 and X dispenses are in the register.

Numbers (prescription and dispense) are gap-free per branch and calendar year in creation order and the
counter rows end at the last one. A random.Random of its own keeps the other apps' rows the same for a seed.
"""

from __future__ import annotations

import bisect
import itertools
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
from patients.devdata.scale import Patients
from pharmacy.models import MovementKind, PrescriptionStatus, Schedule
from pharmacy.numbering import format_dispense_number, format_prescription_number

ZONE = zoneinfo.ZoneInfo("Asia/Kolkata")  # every generated branch's time zone (clinic.devdata.scale)
PRESCRIBED = 0.75  # completed appointments with a prescription
DISPENSED = 0.9  # prescriptions dispensed
PARTIAL = 0.1  # of those, dispensed only in part
CANCELLED = 0.01  # prescriptions cancelled before any dispense
OTC_SALES = 0.25  # over-the-counter dispenses per completed appointment
WRITE_OFF_AFTER = timedelta(days=30)  # expired stock older than this was written off
ACTOR_STORES = "staff:stores"

# generic name, forms (with strengths), schedule weight table key
GENERICS: list[tuple[str, str]] = [
    ("Paracetamol", "otc"), ("Ibuprofen", "otc"), ("Cetirizine", "otc"), ("Loratadine", "otc"),
    ("Oral rehydration salts", "otc"), ("Antacid", "otc"), ("Multivitamin", "otc"), ("Calcium carbonate", "otc"),
    ("Folic acid", "otc"), ("Ferrous sulfate", "otc"), ("Zinc sulfate", "otc"), ("Povidone iodine", "otc"),
    ("Amoxicillin", "h"), ("Azithromycin", "h"), ("Ciprofloxacin", "h"), ("Doxycycline", "h"),
    ("Metformin", "h"), ("Glimepiride", "h"), ("Amlodipine", "h"), ("Telmisartan", "h"), ("Atorvastatin", "h"),
    ("Rosuvastatin", "h"), ("Losartan", "h"), ("Metoprolol", "h"), ("Pantoprazole", "h"), ("Omeprazole", "h"),
    ("Ondansetron", "h"), ("Domperidone", "h"), ("Levothyroxine", "h"), ("Salbutamol", "h"),
    ("Budesonide", "h"), ("Montelukast", "h"), ("Prednisolone", "h"), ("Clopidogrel", "h"), ("Aspirin", "h"),
    ("Insulin glargine", "h"), ("Diclofenac", "h"), ("Ceftriaxone", "h"), ("Metronidazole", "h"),
    ("Fluconazole", "h"), ("Acyclovir", "h"), ("Enalapril", "h"), ("Furosemide", "h"), ("Spironolactone", "h"),
    ("Cefixime", "h1"), ("Levofloxacin", "h1"), ("Moxifloxacin", "h1"), ("Cefpodoxime", "h1"),
    ("Tramadol", "h1"), ("Alprazolam", "h1"), ("Clonazepam", "h1"), ("Zolpidem", "h1"), ("Codeine syrup", "h1"),
    ("Buprenorphine", "x"), ("Morphine", "x"), ("Pentazocine", "x"), ("Methylphenidate", "x"),
]  # fmt: skip
SCHEDULE_OF = {"otc": Schedule.OTC, "h": Schedule.H, "h1": Schedule.H1, "x": Schedule.X}
# form, unit, strengths, MRP per unit range, GST %, HSN code
FORMS: list[tuple[str, str, tuple[str, ...], tuple[float, float], str, str, int]] = [
    ("tablet", "tablet", ("5 mg", "10 mg", "20 mg", "40 mg", "250 mg", "500 mg", "650 mg"), (0.5, 30), "5", "30049099", 55),
    ("capsule", "capsule", ("20 mg", "40 mg", "250 mg", "500 mg"), (1, 40), "5", "30049099", 15),
    ("syrup", "bottle", ("100 ml", "60 ml", "125 mg/5 ml"), (30, 250), "5", "30049011", 10),
    ("injection", "vial", ("1 ml", "2 ml", "1 g", "500 mg"), (20, 900), "5", "30049099", 8),
    ("ointment", "tube", ("15 g", "30 g"), (40, 300), "12", "30049039", 5),
    ("drops", "bottle", ("5 ml", "10 ml"), (25, 180), "12", "30049039", 4),
    ("inhaler", "inhaler", ("100 mcg", "200 mcg"), (150, 700), "12", "30049099", 3),
]  # fmt: skip
BRANDS = ["Cipla", "Sun", "Lupin", "Zydus", "Mankind", "Alkem", "Torrent", "Glenmark", "Intas", "Abbott"]
DOSES = {"tablet": "1 tablet", "capsule": "1 capsule", "syrup": "5 ml", "injection": "1 vial", "ointment": "apply",
         "drops": "2 drops", "inhaler": "2 puffs"}  # fmt: skip
ROUTES = {"tablet": "oral", "capsule": "oral", "syrup": "oral", "injection": "intravenous", "ointment": "topical",
          "drops": "ophthalmic", "inhaler": "inhalation"}  # fmt: skip
FREQUENCIES = [("once a day", 1), ("twice a day", 2), ("three times a day", 3)]
DURATIONS = [3, 5, 5, 7, 7, 10, 14, 30]
DISPENSERS = ["staff:pharmacist", "staff:pharmacist", "api:pharmacy-pos"]
CANCEL_REASONS = ["Changed to another drug", "Patient allergic", "Prescribed in error"]


@dataclass(frozen=True, slots=True)
class ScaleDrug:
    id: Any
    code: str
    form: str
    unit: str
    schedule: str
    mrp: Decimal
    name: str  # display name, as Drug.display_name


@dataclass(slots=True)
class _Batch:
    id: Any
    expiry: date
    received: datetime
    mrp: Decimal
    received_quantity: int = 0
    left: int = 0


@dataclass(slots=True)
class _Shelf:
    """The batches of one drug at one branch, in receipt order, and those still holding stock."""

    batches: list[_Batch] = field(default_factory=list)
    open: list[_Batch] = field(default_factory=list)
    last: datetime | None = None  # the last dispense from it


@dataclass(slots=True)
class _Need:
    drug: int
    quantity: int
    item_id: Any = None


@dataclass(slots=True)
class _Dispense:
    at: datetime
    branch: int
    patient: Any
    prescription: Any  # (id, number, doctor id) or None
    needs: list[_Need]
    id: Any = None
    number: str = ""


@dataclass
class PharmacyCatalogue:
    drugs: list[ScaleDrug]
    stocked: list[list[int]]  # drug indexes by branch index
    weights: list[float]  # demand weight by drug index (a long tail)


def generate_drugs(
    rng: random.Random, *, organisation: Organisation, count: int, moment: datetime, timings: Timings
) -> PharmacyCatalogue:
    """`count` drugs, each stocked at 70-85 % of the branches with a reorder level at most of them."""
    form_weights = [f[6] for f in FORMS]
    drugs: list[ScaleDrug] = []
    rows: list[tuple[Any, ...]] = []
    for index in range(count):
        generic, schedule_key = GENERICS[index % len(GENERICS)]
        form, unit, strengths, (low, high), gst, hsn, _ = rng.choices(FORMS, weights=form_weights)[0]
        strength = rng.choice(strengths)
        brand = f"{rng.choice(BRANDS)} {generic.split()[0]}"
        code = f"{''.join(c for c in generic.upper() if c.isalpha())[:5]}-{index + 1:04d}"
        mrp = Decimal(str(round(rng.uniform(low, high), 2)))
        drug = ScaleDrug(
            rng_uuid(rng), code, form, unit, SCHEDULE_OF[schedule_key], mrp, f"{generic} {strength} {form}"
        )
        drugs.append(drug)
        rows.append(
            (drug.id, code, generic, brand, form, strength, hsn, Decimal(gst), drug.schedule, unit, mrp, True, moment,
             moment)
        )  # fmt: skip
    copy_rows(
        "pharmacy_drug",
        ["id", "code", "generic_name", "brand_name", "form", "strength", "hsn_code", "gst_rate", "schedule", "unit",
         "mrp", "active", "created_at", "updated_at"],
        rows,
        timings=timings,
    )  # fmt: skip
    stocked: list[list[int]] = []
    levels: list[tuple[Any, ...]] = []
    for branch in organisation.branches:
        share = rng.uniform(0.70, 0.85)
        here = [index for index in range(count) if rng.random() < share]
        stocked.append(here)
        levels.extend(
            (branch.id, drugs[index].id, rng.choice([20, 50, 100, 200])) for index in here if rng.random() < 0.8
        )
    copy_rows("pharmacy_reorderlevel", ["branch_id", "drug_id", "level"], levels, timings=timings)
    order = list(range(count))
    rng.shuffle(order)
    weights = [0.0] * count
    for rank, index in enumerate(order):
        weights[index] = 1 / (rank + 1) ** 0.9
    return PharmacyCatalogue(drugs, stocked, weights)


def _quantity(rng: random.Random, drug: ScaleDrug, per_day: int, days: int) -> int:
    if drug.form in ("tablet", "capsule"):
        return per_day * days
    if drug.form == "injection":
        return min(per_day * days, rng.randint(1, 5))
    return rng.randint(1, 2)


class _Picker:
    """Drugs by demand among those stocked at a branch (cumulative weights, bisect)."""

    def __init__(self, catalogue: PharmacyCatalogue, branch: int, *, otc_only: bool = False) -> None:
        self.indexes = [
            i for i in catalogue.stocked[branch] if not otc_only or catalogue.drugs[i].schedule == Schedule.OTC
        ]
        self.cumulative = list(itertools.accumulate(catalogue.weights[i] for i in self.indexes))

    def pick(self, rng: random.Random, count: int) -> list[int]:
        chosen: list[int] = []
        for _ in range(count * 4):
            if len(chosen) == count or not self.indexes:
                break
            at = bisect.bisect_left(self.cumulative, rng.random() * self.cumulative[-1])
            index = self.indexes[min(at, len(self.indexes) - 1)]
            if index not in chosen:
                chosen.append(index)
        return chosen


def generate_pharmacy(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    completed: Sequence[CompletedAppointment],
    catalogue: PharmacyCatalogue,
    first_day: date,
    today: date,
    timings: Timings,
) -> dict[str, int]:
    """Prescriptions (with their medications), then batches and receipts, dispenses and their movements, the
    register, write-offs and the number counters."""
    now = datetime.combine(today, datetime.min.time(), tzinfo=ZONE).astimezone(UTC) + timedelta(hours=6)
    start = datetime.combine(first_day, datetime.min.time(), tzinfo=ZONE).astimezone(UTC)
    totals = dict.fromkeys(("prescriptions", "dispenses", "lines", "batches", "register", "write_offs"), 0)
    pickers = [_Picker(catalogue, b) for b in range(len(organisation.branches))]
    otc = [_Picker(catalogue, b, otc_only=True) for b in range(len(organisation.branches))]
    dispenses = _prescriptions(rng, organisation, patients, completed, catalogue, pickers, now, totals, timings=timings)
    dispenses.extend(_otc_sales(rng, organisation, patients, catalogue, otc, len(completed), start, now))
    dispenses.sort(key=lambda d: d.at)
    shelves: dict[tuple[int, int], _Shelf] = defaultdict(_Shelf)
    for branch, here in enumerate(catalogue.stocked):
        for drug in here:  # opening stock, received before the history starts
            received = start - timedelta(days=rng.randint(1, 90))
            _receive(rng, shelves[branch, drug], catalogue.drugs[drug], received, received.date() + timedelta(
                days=rng.randint(200, 900)))  # fmt: skip
    lines, movements, register = _allocate(rng, dispenses, catalogue, shelves, organisation, totals)
    for (_, drug), shelf in shelves.items():  # stock today for every stocked drug
        if not any(b.expiry > today for b in shelf.open):
            received = now - timedelta(minutes=30)  # after every dispense: FEFO never passed it over
            _receive(rng, shelf, catalogue.drugs[drug], received, today + timedelta(days=rng.randint(20, 700)))
    _write_batches(rng, shelves, catalogue, organisation, today, now, totals, timings)
    _write_dispenses(dispenses, lines, movements, register, organisation, timings)
    return totals


def _receive(rng: random.Random, shelf: _Shelf, drug: ScaleDrug, received: datetime, expiry: date) -> _Batch:
    units = rng.choice([200, 500, 1000, 2000]) if drug.form in ("tablet", "capsule") else rng.choice([20, 50, 100])
    batch = _Batch(rng_uuid(rng), expiry, received, drug.mrp, units, units)
    shelf.batches.append(batch)
    shelf.open.append(batch)
    return batch


def _prescriptions(
    rng: random.Random,
    organisation: Organisation,
    patients: Patients,
    completed: Sequence[CompletedAppointment],
    catalogue: PharmacyCatalogue,
    pickers: list[_Picker],
    now: datetime,
    totals: dict[str, int],
    *,
    timings: Timings,
) -> list[_Dispense]:
    """Prescriptions, their items and medications, numbered per branch and year in creation order; returns the
    dispenses against them (not yet allocated to batches)."""
    written = []
    for visit in completed:
        if rng.random() < PRESCRIBED:
            written.append((visit.checked_in + (visit.completed - visit.checked_in) * rng.random(), visit))
    written.sort(key=lambda w: (w[1].branch, w[0]))
    counters: dict[tuple[Any, int], int] = {}
    prescriptions: list[tuple[Any, ...]] = []
    items: list[tuple[Any, ...]] = []
    medications: list[tuple[Any, ...]] = []
    dispenses: list[_Dispense] = []
    for created, visit in written:
        branch = organisation.branches[visit.branch]
        local = created.astimezone(ZONE).date()
        key = (branch.id, local.year)
        counters[key] = counters.get(key, 0) + 1
        number = format_prescription_number(branch.code, local.year, counters[key])
        prescription_id = rng_uuid(rng)
        patient_id = patients.ids[visit.patient]
        doctor_id = organisation.doctors[visit.doctor].id
        chosen = pickers[visit.branch].pick(rng, rng.choices([1, 2, 3, 4], weights=[35, 35, 20, 10])[0])
        roll = rng.random()
        cancelled = roll < CANCELLED
        dispensed = not cancelled and roll < CANCELLED + DISPENSED
        partial = dispensed and rng.random() < PARTIAL
        at = min(visit.completed + timedelta(minutes=rng.randint(2, 60)), now - timedelta(hours=1))
        needs: list[_Need] = []
        complete = dispensed
        for position, index in enumerate(chosen):
            drug = catalogue.drugs[index]
            frequency, per_day = rng.choice(FREQUENCIES)
            days = rng.choice(DURATIONS)
            quantity = _quantity(rng, drug, per_day, days)
            given = 0
            if dispensed:
                given = quantity if not partial or position > 0 else rng.randint(0, quantity - 1)
            complete = complete and given == quantity
            item_id, medication_id = rng_uuid(rng), rng_uuid(rng)
            end = local + timedelta(days=days - 1)
            if cancelled:
                end = min(end, local)
            medications.append(
                (medication_id, patient_id, drug.name[:100], DOSES[drug.form], frequency, local, end, False, None, "",
                 "", created, created)
            )  # fmt: skip
            items.append(
                (item_id, prescription_id, position, index, DOSES[drug.form], frequency, ROUTES[drug.form], days,
                 quantity, "", given, medication_id)
            )  # fmt: skip
            if given:
                needs.append(_Need(index, given, item_id))
        status = (
            PrescriptionStatus.CANCELLED
            if cancelled
            else (PrescriptionStatus.COMPLETED if complete else PrescriptionStatus.ACTIVE)
        )
        cancelled_at = created + timedelta(minutes=rng.randint(5, 120)) if cancelled else None
        updated = cancelled_at or (at if needs else created)
        prescriptions.append(
            (prescription_id, branch.id, patient_id, doctor_id, visit.id, number, status, "staff:doctor",
             cancelled_at, rng.choice(CANCEL_REASONS) if cancelled else "", created, updated)
        )  # fmt: skip
        if needs:
            dispenses.append(_Dispense(at, visit.branch, patient_id, (prescription_id, number, doctor_id), needs))
    totals["prescriptions"] = len(prescriptions)
    copy_rows(
        "pharmacy_prescription",
        ["id", "branch_id", "patient_id", "doctor_id", "appointment_id", "prescription_number", "status",
         "created_by", "cancelled_at", "cancellation_reason", "created_at", "updated_at"],
        prescriptions,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "patients_medication",
        ["id", "patient_id", "name", "dosage", "frequency", "start_date", "end_date", "entered_in_error",
         "entered_in_error_at", "entered_in_error_by", "entered_in_error_reason", "created_at", "updated_at"],
        medications,
        timings=timings,
    )  # fmt: skip
    drug_ids = [d.id for d in catalogue.drugs]
    copy_rows(
        "pharmacy_prescriptionitem",
        ["id", "prescription_id", "position", "drug_id", "dose", "frequency", "route", "duration_days", "quantity",
         "instructions", "dispensed_quantity", "medication_id"],
        ((*row[:3], drug_ids[row[3]], *row[4:]) for row in items),
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "pharmacy_prescriptioncounter",
        ["branch_id", "year", "last_number"],
        [(branch_id, year, last) for (branch_id, year), last in counters.items()],
        timings=timings,
    )
    return dispenses


def _otc_sales(
    rng: random.Random,
    organisation: Organisation,
    patients: Patients,
    catalogue: PharmacyCatalogue,
    otc: list[_Picker],
    completed: int,
    start: datetime,
    now: datetime,
) -> list[_Dispense]:
    """Over-the-counter sales of OTC drugs at any branch, to a registered patient half of the time."""
    sales: list[_Dispense] = []
    span = (now - start).total_seconds()
    branches = len(organisation.branches)
    for _ in range(int(completed * OTC_SALES)):
        branch = rng.randrange(branches)
        at = start + timedelta(seconds=rng.uniform(0, span - 3600))
        chosen = otc[branch].pick(rng, rng.choice([1, 1, 2]))
        if not chosen:
            continue
        patient = None
        if rng.random() < 0.5:
            candidate = rng.randrange(len(patients.ids))
            if patients.registered_days[candidate] <= at.date():
                patient = patients.ids[candidate]
        needs = [_Need(i, _quantity(rng, catalogue.drugs[i], rng.randint(1, 3), rng.randint(1, 5))) for i in chosen]
        sales.append(_Dispense(at, branch, patient, None, needs))
    return sales


def _allocate(
    rng: random.Random,
    dispenses: list[_Dispense],
    catalogue: PharmacyCatalogue,
    shelves: dict[tuple[int, int], _Shelf],
    organisation: Organisation,
    totals: dict[str, int],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """In time order: each need taken first expiry first out from the non-expired batches received before it,
    with a new batch received an hour to two days earlier when they run short. Returns the dispense lines,
    their movements and the register entries (ids of dispenses filled in by _write_dispenses)."""
    lines: list[tuple[Any, ...]] = []
    movements: list[tuple[Any, ...]] = []
    register: list[tuple[Any, ...]] = []
    for dispense in dispenses:
        local = dispense.at.astimezone(ZONE).date()
        actor = rng.choice(DISPENSERS)
        dispense.needs = [n for n in dispense.needs if n.quantity > 0]
        drawn: list[tuple[Any, ...]] = []
        for need in dispense.needs:
            drug = catalogue.drugs[need.drug]
            shelf = shelves[dispense.branch, need.drug]
            usable = [b for b in shelf.open if b.expiry > local and b.received <= dispense.at]
            if sum(b.left for b in usable) < need.quantity:
                received = dispense.at - timedelta(minutes=rng.randint(60, 2880))
                if shelf.last is not None and received <= shelf.last:  # FEFO must not have passed it over
                    received = shelf.last + (dispense.at - shelf.last) / 2
                batch = _receive(rng, shelf, drug, received, local + timedelta(days=rng.randint(300, 1000)))
                batch.received_quantity = batch.left = max(batch.left, need.quantity)
                usable.append(batch)
            wanted = need.quantity
            for batch in sorted(usable, key=lambda b: (b.expiry, b.received)):
                taken = min(wanted, batch.left)
                batch.left -= taken
                wanted -= taken
                drawn.append((need, drug, batch, taken))
                if wanted == 0:
                    break
            shelf.open = [b for b in shelf.open if b.left > 0]
            shelf.last = dispense.at
        dispense.id = rng_uuid(rng)
        for position, (need, drug, batch, taken) in enumerate(drawn):
            line_id = rng_uuid(rng)
            lines.append((line_id, position, taken, batch.mrp, 0, batch.id, dispense, drug.id, need.item_id))
            movements.append((MovementKind.DISPENSE, -taken, "", actor, dispense.at, batch.id, line_id))
            if dispense.prescription is not None and drug.schedule in (Schedule.H1, Schedule.X):
                register.append((local, dispense, drug, batch.id, line_id, taken))
        totals["lines"] += len(drawn)
    totals["dispenses"] = len(dispenses)
    totals["register"] = len(register)
    return lines, movements, register


def _write_batches(
    rng: random.Random,
    shelves: dict[tuple[int, int], _Shelf],
    catalogue: PharmacyCatalogue,
    organisation: Organisation,
    today: date,
    now: datetime,
    totals: dict[str, int],
    timings: Timings,
) -> None:
    """Every batch, empty, then its receipt (which fills it); the dispenses come after."""
    batches: list[tuple[Any, ...]] = []
    receipts: list[tuple[Any, ...]] = []
    write_offs: list[tuple[Any, ...]] = []
    for (branch, drug), shelf in shelves.items():
        branch_id, drug_id = organisation.branches[branch].id, catalogue.drugs[drug].id
        for number, batch in enumerate(shelf.batches):
            cost = (batch.mrp * Decimal("0.7")).quantize(Decimal("0.01"))
            batches.append(
                (batch.id, drug_id, branch_id, f"B{batch.received:%y%m}-{number + 1:03d}", batch.expiry, 0, cost,
                 batch.mrp, batch.received, batch.received, batch.received)
            )  # fmt: skip
            receipts.append((MovementKind.RECEIPT, batch.received_quantity, "", ACTOR_STORES, batch.received, batch.id))
            expired_at = datetime.combine(batch.expiry, datetime.min.time(), tzinfo=ZONE)
            if batch.left > 0 and expired_at + WRITE_OFF_AFTER < now:
                at = expired_at + timedelta(days=rng.randint(1, 20))
                write_offs.append((MovementKind.EXPIRY_WRITE_OFF, -batch.left, "Expired", ACTOR_STORES, at,
                                        batch.id))  # fmt: skip
    totals["batches"] = len(batches)
    totals["write_offs"] = len(write_offs)
    copy_rows(
        "pharmacy_batch",
        ["id", "drug_id", "branch_id", "batch_number", "expiry_date", "quantity_on_hand", "unit_cost", "mrp",
         "received_at", "created_at", "updated_at"],
        batches,
        timings=timings,
    )  # fmt: skip
    receipts.sort(key=lambda r: r[4])
    columns = ["kind", "quantity", "reason", "actor", "at", "batch_id"]
    copy_rows("pharmacy_stockmovement", columns, receipts, timings=timings)
    # Written off after every dispense of the batch (none takes from an expired batch): safe to insert first.
    write_offs.sort(key=lambda r: r[4])
    copy_rows("pharmacy_stockmovement", columns, write_offs, timings=timings)


def _write_dispenses(
    dispenses: list[_Dispense],
    lines: list[tuple[Any, ...]],
    movements: list[tuple[Any, ...]],
    register: list[tuple[Any, ...]],
    organisation: Organisation,
    timings: Timings,
) -> None:
    """Dispenses numbered per branch and year in time order, their lines, movements and register entries."""
    counters: dict[tuple[Any, int], int] = {}
    rows: list[tuple[Any, ...]] = []
    for dispense in dispenses:
        branch = organisation.branches[dispense.branch]
        year = dispense.at.astimezone(ZONE).year
        key = (branch.id, year)
        counters[key] = counters.get(key, 0) + 1
        dispense.number = number = format_dispense_number(branch.code, year, counters[key])
        prescription_id = dispense.prescription[0] if dispense.prescription else None
        rows.append(
            (dispense.id, branch.id, dispense.patient, prescription_id, number, None, "staff:pharmacist", dispense.at,
             dispense.at)
        )  # fmt: skip
    copy_rows(
        "pharmacy_dispense",
        ["id", "branch_id", "patient_id", "prescription_id", "dispense_number", "invoice_id", "dispensed_by",
         "created_at", "updated_at"],
        rows,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "pharmacy_dispenseline",
        ["id", "position", "quantity", "unit_price", "returned_quantity", "batch_id", "dispense_id", "drug_id",
         "prescription_item_id"],
        ((*line[:6], line[6].id, *line[7:]) for line in lines),
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "pharmacy_stockmovement",
        ["kind", "quantity", "reason", "actor", "at", "batch_id", "dispense_line_id"],
        movements,
        timings=timings,
    )
    copy_rows(
        "pharmacy_controlleddrugentry",
        ["date", "dispense_id", "dispense_number", "prescription_number", "patient_id", "prescriber_id", "branch_id",
         "drug_id", "schedule", "batch_id", "dispense_line_id", "quantity"],
        (
            (day, d.id, d.number, d.prescription[1], d.patient, d.prescription[2],
             organisation.branches[d.branch].id, drug.id, drug.schedule, batch_id, line_id, quantity)
            for day, d, drug, batch_id, line_id, quantity in register
        ),
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "pharmacy_dispensecounter",
        ["branch_id", "year", "last_number"],
        [(branch_id, year, last) for (branch_id, year), last in counters.items()],
        timings=timings,
    )

"""factory-boy factories for patients and their clinical records, and helpers shared by the patient tests."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import factory
from django.test import Client
from django.utils import timezone

from clinic import crypto
from patients.identifiers import verhoeff_check_digit
from patients.models import Allergy, Diagnosis, Insurance, Medication, Patient, Visit
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import bearer

PATIENTS = "/api/v1/patients"

# Factory patient_ids start high so they never meet the numbers the API takes from the database
# sequence (which is not reset between tests).
FACTORY_PATIENT_NUMBER_BASE = 800_000


def aadhaar(body11: str) -> str:
    """A valid 12-digit Aadhaar number: the 11 digits given plus their Verhoeff check digit."""
    return body11 + verhoeff_check_digit(body11)


class PatientFactory(factory.django.DjangoModelFactory):
    patient_id = factory.Sequence(lambda n: f"PAT-{FACTORY_PATIENT_NUMBER_BASE + n:06d}")
    first_name = "Priya"
    last_name = factory.Sequence(lambda n: f"Test{n}")
    date_of_birth = factory.Sequence(lambda n: date(1960, 1, 1) + timedelta(days=(97 * n) % 16_000))
    gender = "female"
    phone = factory.Sequence(lambda n: f"+9198{n:08d}")
    registration_branch = factory.SubFactory(BranchFactory)

    class Meta:
        model = Patient
        skip_postgeneration_save = True

    @factory.post_generation
    def national_id(self, create, extracted, **kwargs):
        """PatientFactory(national_id="234567890124") stores it the way the service does."""
        if extracted:
            self.national_id_encrypted = crypto.encrypt(extracted)
            self.national_id_hash = crypto.lookup_hash(extracted)
            self.national_id_last4 = extracted[-4:]
            if create:
                self.save()


class InsuranceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Insurance

    patient = factory.SubFactory(PatientFactory)
    provider = "Star Health"
    policy_number = factory.Sequence(lambda n: f"SH-{n:06d}")
    valid_until = None


class DiagnosisFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Diagnosis

    patient = factory.SubFactory(PatientFactory)
    code = "E11.9"
    description = "Type 2 diabetes mellitus"
    status = Diagnosis.Status.ACTIVE


class AllergyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Allergy

    patient = factory.SubFactory(PatientFactory)
    substance = "Penicillin"
    reaction = "Rash"
    severity = Allergy.Severity.MODERATE


class MedicationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Medication

    patient = factory.SubFactory(PatientFactory)
    name = "Metformin"
    dosage = "500 mg"
    frequency = "twice daily"


class VisitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Visit

    patient = factory.SubFactory(PatientFactory)
    type = Visit.Type.OUTPATIENT
    branch = factory.SelfAttribute("patient.registration_branch")
    department = factory.SubFactory(DepartmentFactory)
    doctor = factory.SubFactory(DoctorFactory, department=factory.SelfAttribute("..department"))
    start = factory.LazyFunction(timezone.now)
    end = None
    reason = "Consultation"


def post_patient(client: Client, token: str, body: Any, key: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(PATIENTS, json.dumps(body), content_type="application/json", **bearer(token), **headers)


def patch_patient(client: Client, token: str, ref: str, body: Any, key: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.patch(
        f"{PATIENTS}/{ref}", json.dumps(body), content_type="application/json", **bearer(token), **headers
    )


def get_patient(client: Client, token: str, ref: str) -> Any:
    return client.get(f"{PATIENTS}/{ref}", **bearer(token))


# --- A realistic population for search tests ---------------------------------------------------------

FIRST_NAMES = [
    "Aarav", "Vivaan", "Aditya", "Vihaan", "Arjun", "Sai", "Reyansh", "Ayaan", "Krishna", "Ishaan",
    "Rohan", "Rahul", "Amit", "Suresh", "Ramesh", "Vikram", "Anil", "Sanjay", "Rajesh", "Manoj",
    "Priya", "Ananya", "Aadhya", "Diya", "Saanvi", "Ishita", "Kavya", "Meera", "Pooja", "Neha",
    "Sunita", "Lakshmi", "Deepa", "Anjali", "Divya", "Shreya", "Nisha", "Rekha", "Geeta", "Swati",
    "Mohammed", "Imran", "Fatima", "Ayesha", "Joseph", "Mary", "Harpreet", "Gurpreet", "Venkat", "Karthik",
    "Abhishek", "Nikhil", "Siddharth", "Varun", "Gaurav", "Pranav", "Tanvi", "Riya", "Sneha", "Aishwarya",
    "Madhuri", "Savitri", "Bhavana", "Chitra", "Farhan", "Zoya", "Naveen", "Prakash", "Yash", "Keerthi",
]  # fmt: skip
LAST_NAMES = [
    "Sharma", "Patel", "Singh", "Kumar", "Reddy", "Rao", "Nair", "Iyer", "Gupta", "Das",
    "Mehta", "Joshi", "Shah", "Verma", "Mishra", "Pillai", "Menon", "Chatterjee", "Banerjee", "Mukherjee",
    "Agarwal", "Bhat", "Kulkarni", "Deshpande", "Naidu", "Choudhury", "Khan", "Fernandes", "Gill", "Sandhu",
    "Krishnan", "Subramanian", "Hegde", "Shetty", "Kamath", "Pandey", "Tiwari", "Yadav", "Jain", "Saxena",
    "Bose", "Ghosh", "Sen", "Dutta", "Malhotra", "Kapoor", "Chopra", "Bhatia", "Srinivasan", "Venkatesan",
]  # fmt: skip


def _skewed(rng: Any, names: list[str]) -> str:
    """Name i has weight 1/(i+1): the first names of each list are the common ones, as in real registers."""
    return rng.choices(names, weights=[1 / (i + 1) for i in range(len(names))], k=1)[0]


def build_population(count: int, *, branch: Any, seed: int) -> list[Patient]:
    """`count` unsaved patients, deterministic for `seed`: skewed first and last names (with many repeats),
    distinct valid Indian mobile numbers, patient_ids PAT-000001.. and ABHA numbers. Fields that
    Patient.save() derives are filled here because bulk_create does not call save()."""
    import random

    rng = random.Random(seed)
    phones = rng.sample(range(600_000_000, 1_000_000_000), count)
    patients = []
    for number in range(1, count + 1):
        first, last = _skewed(rng, FIRST_NAMES), _skewed(rng, LAST_NAMES)
        phone = f"+919{phones[number - 1]:09d}"
        patients.append(
            Patient(
                patient_id=f"PAT-{number:06d}",
                first_name=first,
                last_name=last,
                search_name=f"{first} {last}".lower(),
                date_of_birth=date(1940, 1, 1) + timedelta(days=rng.randint(0, 80 * 365)),
                gender=rng.choice(["male", "female"]),
                phone=phone,
                phone_digits_reversed=phone[1:][::-1],
                registration_branch=branch,
                national_health_id=f"{rng.randint(10, 99)}{number:012d}",
            )
        )
    return patients

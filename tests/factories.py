"""factory-boy factories for the organisation and API clients."""

from __future__ import annotations

from typing import Any

import factory
from oauth2_provider.generators import generate_client_secret

from clinic.models import Branch, Department, Doctor
from integrations.models import ApiClient


class BranchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Branch
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"B{n:03d}")
    name = factory.LazyAttribute(lambda o: f"Branch {o.code}")
    state = "Karnataka"
    time_zone = "Asia/Kolkata"
    cancellation_window_minutes = 60


class DepartmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Department
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"Department {n}")


class DoctorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Doctor
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Dr. Test {n}")
    department = factory.SubFactory(DepartmentFactory)
    default_slot_minutes = 15

    @factory.post_generation
    def branches(self, create, extracted, **kwargs):
        if create and extracted:
            self.branches.set(extracted)


class ApiClientFactory(factory.django.DjangoModelFactory):
    """Builds a client and keeps its plaintext secret on `.secret` (the database only has the hash)."""

    class Meta:
        model = ApiClient
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Client {n}")
    allowed_scopes = factory.LazyFunction(lambda: ["appointments:read"])
    client_secret = factory.LazyFunction(generate_client_secret)

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        secret = kwargs["client_secret"]
        client = super()._create(model_class, *args, **kwargs)
        client.secret = secret
        return client

    @factory.post_generation
    def branches(self, create, extracted, **kwargs):
        if create and extracted:
            self.branches.set(extracted)


def network_wide(user: Any) -> Any:
    """Mark a staff user network-wide (every branch's rows in the admin)."""
    from clinic.models import StaffProfile

    StaffProfile.objects.update_or_create(user=user, defaults={"network_wide": True})
    return user


def staff_of(user: Any, *branches: Any) -> Any:
    """Limit a staff user to these branches."""
    from clinic.models import StaffProfile

    profile, _ = StaffProfile.objects.update_or_create(user=user, defaults={"network_wide": False})
    profile.branches.set(branches)
    return user

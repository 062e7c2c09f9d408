from django.apps import AppConfig


class PatientsConfig(AppConfig):
    name = "patients"
    verbose_name = "Patients"

    def ready(self) -> None:
        # The app's error classes declare its problem kinds: defined at start-up, before any request or
        # OpenAPI document reads the registry (clinic.api.errors.PROBLEM_KINDS).
        from patients import errors  # noqa: F401
        from patients.events import events_register

        events_register()

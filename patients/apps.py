from django.apps import AppConfig


class PatientsConfig(AppConfig):
    name = "patients"
    verbose_name = "Patients"

    def ready(self) -> None:
        from patients.events import events_register

        events_register()

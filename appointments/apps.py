from django.apps import AppConfig


class AppointmentsConfig(AppConfig):
    name = "appointments"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        # The app's error classes declare its problem kinds: defined at start-up, before any request or
        # OpenAPI document reads the registry (clinic.api.errors.PROBLEM_KINDS).
        from appointments import errors  # noqa: F401
        from appointments.events import events_register

        events_register()

from django.apps import AppConfig


class AppointmentsConfig(AppConfig):
    name = "appointments"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        from appointments.events import events_register

        events_register()

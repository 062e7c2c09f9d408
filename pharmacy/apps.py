from django.apps import AppConfig


class PharmacyConfig(AppConfig):
    name = "pharmacy"
    verbose_name = "Pharmacy"

    def ready(self) -> None:
        # The app's error classes declare its problem kinds and its events register: at start-up, before any
        # request or OpenAPI document reads the registries.
        from pharmacy import errors  # noqa: F401
        from pharmacy.events import events_register

        events_register()

from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "lab"
    verbose_name = "Laboratory and imaging"

    def ready(self) -> None:
        # The app's error classes declare its problem kinds and its events register: at start-up, before any
        # request or OpenAPI document reads the registries.
        from lab import errors  # noqa: F401
        from lab.events import events_register

        events_register()

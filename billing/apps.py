from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        # The app's error classes declare its problem kinds: defined at start-up, before any request or
        # OpenAPI document reads the registry (clinic.api.errors.PROBLEM_KINDS).
        from billing import errors  # noqa: F401
        from billing.events import events_register

        events_register()

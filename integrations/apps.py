from django.apps import AppConfig
from django.core.checks import Tags, register


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"

    def ready(self) -> None:
        from integrations.webhooks.checks import private_targets_check

        register(private_targets_check, Tags.security, deploy=True)

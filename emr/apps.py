from django.apps import AppConfig


class EmrConfig(AppConfig):
    name = "emr"
    verbose_name = "Clinical record"

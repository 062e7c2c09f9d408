from axes import apps as axes_apps
from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from oauth2_provider import apps as oauth_apps


class ClinicConfig(AppConfig):
    name = "clinic"
    verbose_name = "Organisation"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from clinic import replica  # noqa: F401 - connects the request signals that select the read replica
        from clinic.roles import role_groups_sync

        # The role groups follow clinic.roles after every migrate, as Django's own permissions do.
        post_migrate.connect(role_groups_sync, sender=self, dispatch_uid="clinic.roles.role_groups_sync")


class ClinicAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with the clinic's site (two-factor login, see clinic.admin_site) as the default
    site, so every app's `@admin.register` and `admin.site` use it."""

    default = False  # named in INSTALLED_APPS; "clinic" alone still means ClinicConfig
    default_site = "clinic.admin_site.ClinicAdminSite"

    def ready(self) -> None:
        super().ready()
        from django.contrib.auth.signals import user_logged_in

        from clinic.admin_site import record_login_time

        user_logged_in.connect(record_login_time, dispatch_uid="clinic.admin_site.record_login_time")


class SignInLockoutsConfig(axes_apps.AppConfig):
    """django-axes under a name staff read on the admin index ("AXES" said nothing to them)."""

    default = False  # named in INSTALLED_APPS
    verbose_name = "Admin sign-in lockouts"


class ApiTokensConfig(oauth_apps.DOTConfig):
    """django-oauth-toolkit under a plain name: what is left of it in the admin is the issued access tokens
    (API clients themselves are under Integrations)."""

    default = False  # named in INSTALLED_APPS
    verbose_name = "API access tokens"

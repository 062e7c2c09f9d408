"""The admin site: login throttled by django-axes, two-factor (TOTP, django-otp) when ADMIN_REQUIRE_2FA is on.

A refused login says one thing whatever was wrong (unknown user, wrong password, a missing, wrong, used or
throttled code, no authenticator set up, not a staff account), so the page never tells which part was right;
and every refusal counts towards django-axes's lockout, a wrong code as much as a wrong password.

The site is Django's default site (`clinic.apps.ClinicAdminConfig.default_site`), so every app's
`@admin.register` lands here. Whether a verified device is required is read from the settings on each
request, not fixed when the site is built: a test (or a deployment reload) that changes the setting is
obeyed at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.admin.options import InlineModelAdmin
from django.contrib.admin.widgets import RelatedFieldWidgetWrapper
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django_otp import devices_for_user
from django_otp.admin import OTPAdminAuthenticationForm, OTPAdminSite
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from clinic.admin_branches import BranchScopedAdmin, BranchScopedInline
from clinic.admin_columns import BooleansInWords
from clinic.admin_pagination import dates_as_a_filter
from clinic.admin_sections import grouped_app_list
from clinic.admin_time import rendered_in, staff_zone
from clinic.api.network import client_ip
from clinic.dashboard import dashboard_sections
from clinic.staff import staff_reader

logger = logging.getLogger(__name__)

# The one message of a refused two-factor login (%(username)s is the user name field's label).
TWO_FACTOR_LOGIN_FAILED = (
    "Please enter the correct %(username)s, password and authentication code for a staff account. Note that "
    "the user name and password may be case-sensitive, and that a code is accepted once, while your "
    "authenticator app shows it."
)
# Shown on the two-factor login page to everyone, before any attempt: it tells nothing about an account.
ENROL_HINT = (
    "No authenticator app set up yet? Ask an administrator to run: "
    "python manage.py add_totp_device --user <your user name>"
)


class _CodeInput(forms.TextInput):
    """A code is good once: a refused login's page never types it back (nor shows what was typed)."""

    def format_value(self, value: Any) -> str | None:
        return None


class OneMessageLoginMixin:
    """Every refusal is the form's `invalid_login` error, and counts as a failed login for django-axes.

    A wrong password already reaches django-axes through `authenticate` (its `user_login_failed` signal); a
    refusal after the password was right (the code, no device, not staff) sends that signal here, so the
    lockout counts both alike."""

    error_messages: dict[str, Any]
    request: HttpRequest | None
    user_cache: Any
    username_field: Any

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()  # type: ignore[misc]
        except forms.ValidationError as refusal:
            if self.user_cache is not None:
                username = self.user_cache.get_username()
                codes = {error.code for error in refusal.error_list}
                logger.info("Admin login refused after the password for %s (%s)", username, ", ".join(map(str, codes)))
                user_login_failed.send(sender=type(self), credentials={"username": username}, request=self.request)
                self.user_cache = None  # the page is then the same as after a wrong password
            raise forms.ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            ) from None


class OneMessageAdminLoginForm(OneMessageLoginMixin, AdminAuthenticationForm):
    """The admin's login without a second factor (ADMIN_REQUIRE_2FA off)."""


class TwoFactorLoginForm(OneMessageLoginMixin, OTPAdminAuthenticationForm):
    """User name, password and the current code of the authenticator app, in one step.

    The page never shows a device choice (it would appear only once the password was right): a user with
    several devices gets the one whose current code was typed."""

    error_messages = {**OTPAdminAuthenticationForm.error_messages, "invalid_login": TWO_FACTOR_LOGIN_FAILED}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["otp_token"].label = "Authentication code"
        self.fields["otp_token"].widget = _CodeInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9]*", "maxlength": "8"}
        )

    def _update_form(self, user: Any) -> None:
        super()._update_form(user)
        self.fields["password"].widget.render_value = False  # never echo the password back into the page

    def _chosen_device(self, user: Any) -> Any:
        device = super()._chosen_device(user)
        if device is None:
            devices = list(devices_for_user(user, confirmed=True, for_verify=True))
            if not devices:
                raise forms.ValidationError("No authenticator device is set up.", code="no_device")
            device = _device_showing(devices, self.cleaned_data.get("otp_token") or "")
        return device


def _device_showing(devices: list[Any], token: str) -> Any:
    """The TOTP device whose code `token` is now, checked without side effects; else the first device (whose
    verification then fails and is throttled as any wrong code)."""
    if len(devices) > 1 and token.isascii() and token.isdigit():
        for device in devices:
            if isinstance(device, TOTPDevice) and device.verify_is_allowed()[0]:
                totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
                if totp.verify(int(token), device.tolerance, device.last_t + 1):
                    return device
    return devices[0]


def _without_delete_link(formfield: Any) -> Any:
    if formfield is not None and isinstance(formfield.widget, RelatedFieldWidgetWrapper):
        formfield.widget.can_delete_related = False
    return formfield


class _NoDeleteLinks(admin.ModelAdmin):
    """No red cross beside a related lookup: next to an invoice line's department it deleted the department
    (or failed on a protected one); deleting a related row is done from its own page."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _without_delete_link(super().formfield_for_dbfield(db_field, request, **kwargs))


class _InlineNoDeleteLinks(InlineModelAdmin):
    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return _without_delete_link(super().formfield_for_dbfield(db_field, request, **kwargs))


def _with_base(cls: type, base: type) -> type:
    if issubclass(cls, base):
        return cls
    return type(cls.__name__, (base, cls), {"__module__": cls.__module__, "__doc__": cls.__doc__})


class ClinicAdminSite(OTPAdminSite):
    # No "View site" link: the service has no public site at "/", so Django's default led staff to a 404.
    site_url = None
    # The home page: reception links, the dashboard of the user\'s roles, the app list grouped by work.
    index_template = "admin/clinic_index.html"

    def __init__(self, name: str = "admin") -> None:
        super().__init__(name)

    @property
    def login_form(self) -> type[AdminAuthenticationForm]:
        return TwoFactorLoginForm if settings.ADMIN_REQUIRE_2FA else OneMessageAdminLoginForm

    @property
    def login_template(self) -> str:
        return "admin/login_2fa.html" if settings.ADMIN_REQUIRE_2FA else "admin/login.html"

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().login(request, {"enrol_hint": ENROL_HINT, **(extra_context or {})})

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        """The home page: the dashboard of the user's roles above the app list grouped by work; an account
        limited to no branch is told why its lists are empty (docs/staff.md §2)."""
        context = {
            "dashboard": dashboard_sections(request),
            "sees_no_branch": staff_reader(request.user).sees_nothing(),
        }
        return super().index(request, {**context, **(extra_context or {})})

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        """Grouped by work (clinic.admin_sections) on the index and in the navigation sidebar; an app's own
        index page (with app_label) stays Django's."""
        app_list = super().get_app_list(request, app_label)
        return app_list if app_label is not None else grouped_app_list(app_list, reverse(f"{self.name}:index"))

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        """Every app's admin, and each of its inlines, without delete links on related lookups and limited to
        the staff member's branches (clinic.admin_branches), with yes/no columns in words (clinic.admin_columns)."""
        admin_class = _with_base(admin_class or admin.ModelAdmin, _NoDeleteLinks)
        admin_class = _with_base(_with_base(admin_class, BooleansInWords), BranchScopedAdmin)
        admin_class = dates_as_a_filter(admin_class)
        inlines = [
            _with_base(_with_base(inline, _InlineNoDeleteLinks), BranchScopedInline) for inline in admin_class.inlines
        ]
        if inlines != list(admin_class.inlines):
            admin_class = type(
                admin_class.__name__, (admin_class,), {"__module__": admin_class.__module__, "inlines": inlines}
            )
        super().register(model_or_iterable, admin_class, **options)

    def admin_view(self, view: Callable[..., Any], cacheable: bool = False) -> Callable[..., Any]:
        """Every admin page in the time zone of the staff member's branches, when they share one
        (clinic.admin_time)."""
        guarded = super().admin_view(view, cacheable)

        @wraps(view)
        def in_branch_time(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return rendered_in(staff_zone(request.user), lambda: guarded(request, *args, **kwargs))

        return in_branch_time

    def has_permission(self, request: HttpRequest) -> bool:
        if not session_within_lifetime(request):
            return False  # the login page again: a session lasts ADMIN_SESSION_HOURS from login at most
        if not settings.ADMIN_REQUIRE_2FA:
            return super(OTPAdminSite, self).has_permission(request)
        # A session that logged in with the password alone (before 2FA was switched on) is not enough.
        return super().has_permission(request)

    def autocomplete_view(self, request: HttpRequest) -> HttpResponse:
        from clinic.admin_audit import Clock, audit_autocomplete_response

        if "\x00" in request.GET.get("term", ""):
            # PostgreSQL text cannot hold NUL: refused here, as the API's hygiene refuses it, not a 500.
            return JsonResponse({"error": "term: NUL characters are not allowed."}, status=400)
        clock = Clock()
        response = super().autocomplete_view(request)
        audit_autocomplete_response(self, request, response, clock)  # the patient picker lists patients
        return response


LOGIN_AT_SESSION_KEY = "clinic_login_at"


def record_login_time(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """user_logged_in receiver: the session remembers when its login happened (epoch seconds)."""
    if request is not None and hasattr(request, "session"):
        request.session[LOGIN_AT_SESSION_KEY] = int(time.time())


def session_within_lifetime(request: HttpRequest) -> bool:
    """Whether the session's login is less than ADMIN_SESSION_HOURS old. Django's own expiry is renewed
    whenever the session is saved; this limit is counted from the login and is never renewed. A session
    without the stamp (force_login in tests, a session from before this check) counts from now."""
    session = getattr(request, "session", None)
    if session is None:
        return True
    login_at = session.get(LOGIN_AT_SESSION_KEY)
    if login_at is None:
        if request.user.is_authenticated:
            session[LOGIN_AT_SESSION_KEY] = int(time.time())
        return True
    return time.time() - login_at < settings.ADMIN_SESSION_HOURS * 3600


def axes_client_ip(request: HttpRequest) -> str | None:
    """The address django-axes counts failures against: the same one the API and its audit log use
    (X-Forwarded-For believed only from TRUSTED_PROXIES), so a client cannot shed its lockout by
    sending a different header."""
    return client_ip(request)

"""Django's browser middleware (sessions, CSRF, the logged-in user, two-factor state, messages), run for the
admin and passed through for the API.

The API (/api/, /fhir/) authenticates every request by its bearer token (clinic.api.authentication) and
never reads a session, a cookie, `request.user` before DRF sets it, or a flash message; its views are all
CSRF-exempt (DRF's and the token endpoints'). Yet these five middlewares ran on every API request: about
5 % of a worker's interpreter time on the framework floor under load (py-spy --gil, 4 workers x 2 threads,
concurrency 16; bench/results/request_floor.md). Each class here is the library's own, subclassed so that
an API path goes straight to the next layer; every other path runs it unchanged. They are subclasses, so
the admin's system checks (which look for these middlewares in MIDDLEWARE) still find them.

CommonMiddleware and XFrameOptionsMiddleware stay on the API: they set Content-Length and X-Frame-Options on
its responses, which stay byte for byte what they were (tests/clinic/test_browser_middleware.py compares
them with Django's own chain). django-axes's middleware stays too: its check looks for it by name, and on
an API request it only reads an attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import AuthenticationMiddleware as _AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as _MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware as _SessionMiddleware
from django.http import HttpRequest, HttpResponseForbidden
from django.middleware.csrf import CsrfViewMiddleware as _CsrfViewMiddleware
from django_otp.middleware import OTPMiddleware as _OTPMiddleware

from clinic.api.paths import API_PREFIX, FHIR_PREFIX

# The path as URL resolution sees it (path_info, without a SCRIPT_NAME prefix): the view an API path
# resolves to is an API view.
_API_PATHS = (API_PREFIX, FHIR_PREFIX)


def is_api_request(request: HttpRequest) -> bool:
    return request.path_info.startswith(_API_PATHS)


class BrowserOnly:
    """Mixin, first in the bases: the wrapped middleware's __call__ for browser paths only."""

    get_response: Callable[[HttpRequest], Any]

    def __call__(self, request: HttpRequest) -> Any:
        if is_api_request(request):
            return self.get_response(request)  # a coroutine when the chain is async: the caller awaits it
        return super().__call__(request)  # type: ignore[misc]


class SessionMiddleware(BrowserOnly, _SessionMiddleware):
    pass


class CsrfViewMiddleware(BrowserOnly, _CsrfViewMiddleware):
    def process_view(
        self, request: HttpRequest, callback: Callable[..., Any], callback_args: Any, callback_kwargs: Any
    ) -> HttpResponseForbidden | None:
        # Django calls process_view apart from __call__: it has to be skipped on its own.
        if is_api_request(request):
            return None
        return super().process_view(request, callback, callback_args, callback_kwargs)


class AuthenticationMiddleware(BrowserOnly, _AuthenticationMiddleware):
    pass


class OTPMiddleware(BrowserOnly, _OTPMiddleware):
    pass


class MessageMiddleware(BrowserOnly, _MessageMiddleware):
    pass

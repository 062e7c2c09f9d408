"""Browser tests: Playwright driving Debian's Chromium against pytest-django's live server on the real
PostgreSQL. Requests to any host but the live server are aborted, so a page that needs the internet
fails here. A failing test leaves a full-page screenshot in test-artifacts/screenshots/.

Without Chromium these tests are skipped with the reason, unless REQUIRE_BROWSER=1 (CI sets it), where a
missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make around it are
# ordinary synchronous calls, which Django would otherwise refuse while a loop is running.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
ADMIN_PASSWORD = "browser-test-password"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CHROMIUM:
        return
    if os.environ.get("REQUIRE_BROWSER") == "1":
        raise pytest.UsageError("REQUIRE_BROWSER=1 but no Chromium found (apt-get install chromium).")
    skip = pytest.mark.skip(reason="Chromium not installed (apt-get install chromium); browser tests skipped")
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any, live_server: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    allowed = urlparse(live_server.url).netloc

    def offline(route: Any) -> None:
        if urlparse(route.request.url).netloc == allowed:
            route.continue_()
        else:
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    context.close()


def current_totp_code(device: Any) -> str:
    """What the staff member's authenticator app shows now (RFC 6238, from the device's key)."""
    from django_otp.oath import totp

    return str(totp(device.bin_key, step=device.step, t0=device.t0, digits=device.digits)).zfill(device.digits)


@pytest.fixture
def admin_page(page: Any, django_user_model: Any, settings: Any) -> Any:
    """A page logged in to the admin as a superuser, the way production requires: password and the
    current code of an enrolled TOTP device (ADMIN_REQUIRE_2FA on, whatever DEBUG says)."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    settings.ADMIN_REQUIRE_2FA = True
    from tests.factories import network_wide

    user = network_wide(django_user_model.objects.create_superuser("staff", "staff@clinic.invalid", ADMIN_PASSWORD))
    device = TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", ADMIN_PASSWORD)
    page.fill("#id_otp_token", current_totp_code(device))
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page

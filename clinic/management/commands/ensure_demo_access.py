"""Creates, once, an admin user and a demo API client, printing their credentials the only time they exist
in clear. Used by `make run`; on later runs it says they exist and how to get new credentials."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser
from django_otp.plugins.otp_totp.models import TOTPDevice

from clinic.devdata.demo_staff import demo_staff_ensure
from clinic.models import StaffProfile
from clinic.roles import ADMINISTRATOR
from integrations.clients.scopes import SCOPES
from integrations.clients.services import api_client_create
from integrations.models import ApiClient

DEMO_CLIENT_NAME = "Demo integrator"


class Command(BaseCommand):
    help = "Create the demo admin user and API client if missing, printing their credentials once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["base_url"].rstrip("/")
        users = get_user_model().objects
        if not users.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            admin = users.create_superuser("admin", "admin@example.com", password)
            # The demo's administrator works across the network; other accounts get branches (docs/staff.md).
            StaffProfile.objects.create(user=admin, network_wide=True)
            admin.groups.add(Group.objects.get(name=ADMINISTRATOR))
            self.stdout.write(self.style.SUCCESS(f"Admin user created: admin / {password}   ({base}/admin/)"))
        else:
            self.stdout.write("Admin user exists (reset with: python manage.py changepassword admin).")
        self._two_factor_hint(users.filter(is_superuser=True).order_by("pk").first())
        self._demo_staff()
        client = ApiClient.objects.filter(name=DEMO_CLIENT_NAME).first()
        if client is None:
            client, secret = api_client_create(
                name=DEMO_CLIENT_NAME,
                description="Created by make run for trying the API. Has every scope.",
                scopes=list(SCOPES),
            )
            self.stdout.write(self.style.SUCCESS("Demo API client created (the secret is shown only now):"))
            self.stdout.write(f"  client_id:     {client.client_id}")
            self.stdout.write(f"  client_secret: {secret}")
            self.stdout.write("  Try it:")
            self.stdout.write(
                f"    curl -s -u '{client.client_id}:{secret}' -d grant_type=client_credentials {base}/api/v1/auth/token"
            )
            self.stdout.write(f"    curl -s -H 'Authorization: Bearer <access_token>' {base}/api/v1/branches")
        else:
            self.stdout.write(
                f"Demo API client exists (client_id {client.client_id}); rotate its secret in the admin to see a new one."
            )

    def _demo_staff(self) -> None:
        """One account per role at each demo branch, each password printed the one time it exists in clear."""
        accounts = demo_staff_ensure()
        created = [account for account in accounts if account.password is not None]
        if created:
            self.stdout.write(self.style.SUCCESS("Demo staff created (user / password, role at branch):"))
            for account in created:
                self.stdout.write(f"  {account.username} / {account.password}   ({account.role} at {account.where})")
            if settings.ADMIN_REQUIRE_2FA:
                self.stdout.write(
                    "  Each also needs an authenticator app (ADMIN_REQUIRE_2FA): "
                    ".venv/bin/python -m clinic.launch manage add_totp_device --user <user>"
                )
        if len(created) < len(accounts):
            names = ", ".join(account.username for account in accounts if account.password is None)
            self.stdout.write(
                f"Demo staff exist ({names}); reset a password with: python manage.py changepassword <user>."
            )

    def _two_factor_hint(self, admin_user: Any) -> None:
        """With ADMIN_REQUIRE_2FA on, the admin needs an authenticator code too: say how to enrol one."""
        if not settings.ADMIN_REQUIRE_2FA or admin_user is None:
            return
        if TOTPDevice.objects.filter(user=admin_user, confirmed=True).exists():
            self.stdout.write("Two-factor authentication is on: log in with the code of your authenticator app.")
            return
        self.stdout.write(
            self.style.WARNING(
                "Two-factor authentication is on (ADMIN_REQUIRE_2FA): before logging in, enrol an authenticator app:\n"
                f"    .venv/bin/python -m clinic.launch manage add_totp_device --user {admin_user.get_username()}"
            )
        )

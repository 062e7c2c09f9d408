"""Enrol a staff member in two-factor authentication: a TOTP device for an authenticator app.

Run on the server (whoever can run it already holds the keys to the database), next to the staff member:
it prints the otpauth:// URI and a QR code in the terminal for their phone to scan, then asks for the code
the app shows and confirms the device only if that code is right. Until then the device is not used to
log in, so a mistyped or unscanned key never locks anybody out.

    python manage.py add_totp_device --user asha
    python manage.py add_totp_device --user asha --replace     (a lost or new phone: the old devices go)
"""

from __future__ import annotations

import io
import sys
from typing import Any

import segno
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django_otp.plugins.otp_totp.models import TOTPDevice


class Command(BaseCommand):
    help = "Create a TOTP (authenticator app) device for a staff user, show its QR code and confirm it with a code."
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="User name of the staff member.")
        parser.add_argument("--name", default="Authenticator app", help="Name of the device, shown in the admin.")
        parser.add_argument(
            "--replace", action="store_true", help="Delete the user's other TOTP devices (a lost or replaced phone)."
        )
        parser.add_argument(
            "--no-confirm",
            action="store_true",
            help="Confirm the device without asking for a code (only when nobody can type one, e.g. scripted setup).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stdin = options.get("stdin") or sys.stdin
        users = get_user_model().objects
        try:
            user = users.get(**{get_user_model().USERNAME_FIELD: options["user"]})
        except users.model.DoesNotExist:
            raise CommandError(f"No user {options['user']!r}.") from None
        if not user.is_staff:
            raise CommandError(f"{user.get_username()} is not staff: only staff log in to the admin.")

        device = TOTPDevice.objects.create(user=user, name=options["name"][:64], confirmed=False)
        uri = device.config_url
        self.stdout.write(f"Scan this QR code with an authenticator app (or enter the URI by hand):\n\n  {uri}\n")
        qr = io.StringIO()
        segno.make(uri, error="m").terminal(out=qr, compact=True)
        self.stdout.write(qr.getvalue())

        if not options["no_confirm"]:
            self.stdout.write("Code shown by the app: ", ending="")
            self.stdout.flush()
            code = stdin.readline().strip()
            if not device.verify_token(code):
                device.delete()
                raise CommandError("That code is not right; nothing was changed. Run the command again.")
        with transaction.atomic():
            if options["replace"]:
                TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
            device.confirmed = True
            device.save(update_fields=["confirmed"])
        self.stdout.write(
            self.style.SUCCESS(
                f"Two-factor device {device.name!r} confirmed for {user.get_username()}: log in with the code the app shows."
            )
        )

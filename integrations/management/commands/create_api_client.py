"""python manage.py create_api_client --name N --scopes "patients:read patients:write" [--branch ID] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.models import Branch
from integrations.clients.scopes import SCOPES
from integrations.clients.services import api_client_create


class Command(BaseCommand):
    help = "Create an API client and print its credentials. The secret is shown only this once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--scopes", required=True, help="Space-separated, e.g. 'patients:read billing:read'.")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--branch", action="append", default=[], help="Branch id or code; repeat for several. Default: all."
        )
        parser.add_argument("--ip", action="append", default=[], help="Allowed address or CIDR; repeat. Default: any.")
        parser.add_argument("--rate-limit", type=int, default=None, help="Requests per minute.")
        parser.add_argument("--token-lifetime", type=int, default=None, help="Access-token lifetime in seconds.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = options["scopes"].split()
        unknown = [scope for scope in scopes if scope not in SCOPES]
        if unknown or not scopes:
            raise CommandError(f"Unknown or missing scopes {unknown}; choose from: {' '.join(SCOPES)}")
        branches = [self._branch(ref) for ref in options["branch"]]
        try:
            client, secret = api_client_create(
                name=options["name"],
                scopes=scopes,
                description=options["description"],
                branch_ids=[branch.id for branch in branches],
                ip_allowlist=options["ip"],
                rate_limit_per_minute=options["rate_limit"],
                token_lifetime_seconds=options["token_lifetime"],
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        result = {
            "id": client.pk,
            "name": client.name,
            "client_id": client.client_id,
            "client_secret": secret,
            "scopes": client.allowed_scopes,
            "branches": [str(branch.id) for branch in branches],
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Created API client {client.name!r}.")
        for key in ("client_id", "client_secret"):
            self.stdout.write(f"  {key}: {result[key]}")
        self.stdout.write(f"  scopes: {' '.join(client.allowed_scopes)}")
        self.stdout.write(
            self.style.WARNING("Store the secret now: it is kept only as a hash and cannot be shown again.")
        )

    @staticmethod
    def _branch(ref: str) -> Branch:
        branch = Branch.objects.filter(code=ref.upper()).first()
        if branch is None:
            try:
                branch = Branch.objects.filter(id=ref).first()
            except ValidationError:
                branch = None
        if branch is None:
            raise CommandError(f"No branch with id or code {ref!r}.")
        return branch

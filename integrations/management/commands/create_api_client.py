"""python manage.py create_api_client --name N --scopes "patients:read patients:write" [--branch ID]
[--jwks FILE-OR-URL [--assertion-only]] [--json]"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.models import Branch
from integrations.clients.jwks import JwksRefused, jwks_fetch, jwks_validate
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
        parser.add_argument(
            "--jwks",
            default=None,
            help="The client's public keys for SMART Backend Services: a JWKS file, or the https URL serving it.",
        )
        parser.add_argument(
            "--assertion-only",
            action="store_true",
            help="With --jwks: tokens only for signed assertions; no secret is printed (none would work).",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = options["scopes"].split()
        unknown = [scope for scope in scopes if scope not in SCOPES]
        if unknown or not scopes:
            raise CommandError(f"Unknown or missing scopes {unknown}; choose from: {' '.join(SCOPES)}")
        branches = [self._branch(ref) for ref in options["branch"]]
        if options["assertion_only"] and not options["jwks"]:
            raise CommandError("--assertion-only needs --jwks: the client's public keys.")
        jwks, jwks_uri = self._jwks(options["jwks"])
        try:
            client, secret = api_client_create(
                name=options["name"],
                scopes=scopes,
                description=options["description"],
                branch_ids=[branch.id for branch in branches],
                ip_allowlist=options["ip"],
                rate_limit_per_minute=options["rate_limit"],
                token_lifetime_seconds=options["token_lifetime"],
                jwks=jwks,
                jwks_uri=jwks_uri,
                assertion_only=options["assertion_only"],
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        result: dict[str, Any] = {
            "id": client.pk,
            "name": client.name,
            "client_id": client.client_id,
            "client_secret": None if client.assertion_only else secret,
            "scopes": client.allowed_scopes,
            "branches": [str(branch.id) for branch in branches],
        }
        if client.has_jwks:
            result["jwks"] = client.jwks_uri or "inline"
            result["token_endpoint_auth_methods"] = ["private_key_jwt"] + ([] if client.assertion_only else ["secret"])
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Created API client {client.name!r}.")
        self.stdout.write(f"  client_id: {client.client_id}")
        if not client.assertion_only:
            self.stdout.write(f"  client_secret: {secret}")
        self.stdout.write(f"  scopes: {' '.join(client.allowed_scopes)}")
        if client.has_jwks:
            self.stdout.write(f"  jwks: {result['jwks']} (signed assertions: private_key_jwt, RS384 or ES384)")
        if not client.assertion_only:
            self.stdout.write(
                self.style.WARNING("Store the secret now: it is kept only as a hash and cannot be shown again.")
            )

    @staticmethod
    def _jwks(ref: str | None) -> tuple[dict[str, Any] | None, str]:
        """(inline set, "") for a file, (None, url) for a URL, which must serve a valid set now."""
        if not ref:
            return None, ""
        try:
            if ref.lower().startswith(("https://", "http://")):
                jwks_fetch(ref)
                return None, ref
            try:
                text = Path(ref).read_text()
            except OSError as exc:
                raise CommandError(f"Cannot read the JWKS file {ref!r}: {exc.strerror}.") from None
            return jwks_validate(text), ""
        except JwksRefused as exc:
            raise CommandError(f"--jwks: {exc}") from None

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

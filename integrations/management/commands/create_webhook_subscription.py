"""python manage.py create_webhook_subscription --name N --url U --events "<kind> <kind> ..."|all [--json]

The kinds are those the domain apps registered (integrations.webhooks.registry), read when the command runs."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.models import Branch
from integrations.webhooks.registry import event_kinds
from integrations.webhooks.services import subscription_create


def _kind_names() -> list[str]:
    return [kind.name for kind in event_kinds()]


class Command(BaseCommand):
    help = "Create a webhook subscription and print its signing secret. The secret is shown only this once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--url", required=True, help="Target URL: https on a public address.")
        parser.add_argument(
            "--events",
            required=True,
            help=f"Space-separated event kinds, or 'all': {' '.join(_kind_names())}.",
        )
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--branch", action="append", default=[], help="Branch id or code; repeat for several. Default: all."
        )
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            help="Extra header 'Name: value' for the receiver's authentication; repeat for several.",
        )
        parser.add_argument("--inactive", action="store_true", help="Create it disabled.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        registered = _kind_names()
        events = options["events"].split()
        if events == ["all"]:
            events = registered
        unknown = [event for event in events if event not in registered]
        if unknown or not events:
            raise CommandError(f"Unknown or missing event kinds {unknown}; choose from: {' '.join(registered)}")
        headers: dict[str, str] = {}
        for header in options["header"]:
            name, colon, value = header.partition(":")
            if not colon:
                raise CommandError(f"Write each header as 'Name: value' (got {header!r}).")
            headers[name.strip()] = value.strip()
        branches = [self._branch(ref) for ref in options["branch"]]
        try:
            subscription, secret = subscription_create(
                name=options["name"],
                target_url=options["url"],
                event_types=events,
                branch_ids=[branch.id for branch in branches],
                extra_headers=headers,
                description=options["description"],
                is_active=not options["inactive"],
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        result = {
            "id": str(subscription.pk),
            "name": subscription.name,
            "url": subscription.target_url,
            "events": subscription.event_types,
            "branches": [str(branch.id) for branch in branches],
            "headers": sorted(headers),
            "active": subscription.is_active,
            "signing_secret": secret,
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"Created webhook subscription {subscription.name!r} ({subscription.pk}).")
        self.stdout.write(f"  url: {subscription.target_url}")
        self.stdout.write(f"  events: {' '.join(subscription.event_types)}")
        self.stdout.write(f"  signing_secret: {secret}")
        self.stdout.write(
            self.style.WARNING("Store the secret now: it cannot be shown again (rotate it in the admin if lost).")
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

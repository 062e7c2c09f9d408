"""Typed readers for configuration from the environment.

Each helper fails loudly (ImproperlyConfigured naming the variable) on a value it cannot parse,
so a typo in deployment configuration stops the process at start instead of silently falling back.
"""

from __future__ import annotations

import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str:
    """The variable, or the contents of the file named by NAME_FILE (Docker and Kubernetes secrets mounted
    as files: SECRET_KEY_FILE, DATABASE_URL_FILE, FIELD_ENCRYPTION_KEY_FILE...), one trailing newline cut.
    Setting both is refused: which one wins would be a guess."""
    value = os.environ.get(name)
    path = os.environ.get(f"{name}_FILE")
    if path:
        if value is not None:
            raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both.")
        value = _read_secret_file(name, path)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"Environment variable {name} is required.")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false/1/0), got {raw!r}.")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}.") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name} must be between {minimum} and {maximum}, got {value}.")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A comma-separated list of IP addresses or CIDR blocks."""
    networks = []
    for item in env_list(name):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name} holds {item!r}, which is not an IP address or CIDR.") from None
    return networks


def _read_secret_file(name: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            content = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        # The path, not the content, in the message: the content is the secret.
        raise ImproperlyConfigured(f"{name}_FILE names {path!r}, which cannot be read: {type(exc).__name__}.") from None
    return content[:-1] if content.endswith("\n") else content

"""Per-client access-token lifetime, handed to oauthlib through OAUTH2_PROVIDER["EXTRA_SERVER_KWARGS"].

Kept free of model imports because the settings module imports it before apps are loaded.
"""

from typing import Any

from django.conf import settings


def token_lifetime(request: Any) -> int:
    """oauthlib calls this with its request after the client authenticated."""
    lifetime = getattr(request.client, "token_lifetime_seconds", None)
    return int(lifetime or settings.ACCESS_TOKEN_EXPIRE_SECONDS)

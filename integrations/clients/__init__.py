"""API clients: the OAuth application model, scopes, secrets and token lifetime, and the token endpoints."""

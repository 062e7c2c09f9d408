"""The access token of a request, its API client and the client's branches, in one statement.

The toolkit's resource-server path (oauthlib's request parsing, then
`AccessToken.objects.select_related(...).first()`, then `client.branches.values_list(...)` in the selectors)
cost about 40 % of the CPU of the framework floor (bench/results/profiles/floor-before.txt), mostly the ORM
compiling the same two queries on every request. This reads the same rows with one precompiled statement and
builds the model instances with `from_db`, as the ORM would.

Nothing is cached across requests: every request reads the token and the client as they are now, so a revoked
token, a deactivated client or a changed branch list holds on the very next request on every process,
without any invalidation to get wrong (docs/api-rules.md §3; tests/clinic/test_bearer.py).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from functools import cache, partial
from typing import Any

from django.db import connection
from django.db.models import Model
from oauth2_provider.models import AccessToken

from clinic.query_plans import server_binding_cursor
from clinic.visibility import client_branch_ids_known
from integrations.models import ApiClient

Converter = Callable[[Any], Any]


def _converters(model: type[Model]) -> list[Converter | None]:
    """What the ORM applies to each column read (JSONField's decoding, for one), as `from_db` expects."""
    converters: list[Converter | None] = []
    for field in model._meta.concrete_fields:
        from_db_value = getattr(field, "from_db_value", None)
        converters.append(
            None if from_db_value is None else partial(lambda value, f: f(value, None, connection), f=from_db_value)
        )
    return converters


def _values(row: Sequence[Any], converters: list[Converter | None]) -> list[Any]:
    return [
        value if convert is None or value is None else convert(value)
        for value, convert in zip(row, converters, strict=True)
    ]


@cache
def _statement() -> tuple[str, list[str], list[str]]:
    token_fields = [f.attname for f in AccessToken._meta.concrete_fields]
    client_fields = [f.attname for f in ApiClient._meta.concrete_fields]
    through = ApiClient.branches.through._meta
    branch_fk = ApiClient._meta.get_field("branches").m2m_reverse_name()
    client_fk = ApiClient._meta.get_field("branches").m2m_column_name()
    quote = connection.ops.quote_name
    token_columns = ", ".join(f"t.{quote(c)}" for c in token_fields)
    client_columns = ", ".join(f"a.{quote(c)}" for c in client_fields)
    branches = f"ARRAY(SELECT b.{quote(branch_fk)} FROM {quote(through.db_table)} b WHERE b.{quote(client_fk)} = a.id)"  # noqa: S608
    # Identifiers from the models' metadata, quoted; the one value is a parameter.
    sql = (
        f"SELECT {token_columns}, {client_columns}, {branches} FROM {quote(AccessToken._meta.db_table)} t "  # noqa: S608
        f"JOIN {quote(ApiClient._meta.db_table)} a ON a.id = t.{quote('application_id')} WHERE t.token_checksum = %s"
    )
    return sql, token_fields, client_fields


_converters_of = cache(_converters)


def access_token_load(token: str) -> AccessToken | None:
    """The stored access token presented as `token` (the toolkit stores its SHA-256 checksum), with its
    `application` (the ApiClient) and that client's branch restriction loaded; None when there is none. A
    token without a client is none: every token of this service is issued to a client."""
    sql, token_fields, client_fields = _statement()
    with server_binding_cursor(connection) as cursor:  # prepared once per connection
        cursor.execute(sql, [hashlib.sha256(token.encode("utf-8")).hexdigest()])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(token_fields)
    token_values = _values(row[:split], _converters_of(AccessToken))
    client_values = _values(row[split : split + len(client_fields)], _converters_of(ApiClient))
    access_token = AccessToken.from_db(connection.alias, token_fields, token_values)
    client = ApiClient.from_db(connection.alias, client_fields, client_values)
    branch_ids: list[uuid.UUID] = row[-1]
    client_branch_ids_known(client, branch_ids)
    access_token.application = client
    return access_token

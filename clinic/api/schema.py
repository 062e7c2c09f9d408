"""The OpenAPI description of each operation: ClinicAutoSchema (query parameters from the views' own
declarations, descriptions from the handlers' docstrings, money as exact decimals), the OAuth2 scheme with
each operation's one scope, and the vocabulary the apps' ViewSets share (pagination and Location headers,
list responses, the `{id}` parameter, problem examples). What the whole document gets afterwards (problem
responses on every operation, the token endpoints, webhooks, links) is clinic.api.openapi."""

from __future__ import annotations

import copy
import inspect
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from clinic.api.openapi import SECURITY_SCHEME
from clinic.api.params import declared_query_params
from clinic.api.permissions import required_scope
from clinic.api.serializers import RequiredUnless, StrictSerializer
from clinic.api.shapes import shape
from integrations.clients.scopes import SCOPES


class ClinicAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the conventions of this API:

    - the query parameters are those of the view's `query_params` declaration (the serializers that
      validate them, and that ClinicAPIView checks the request against), so documented and accepted
      parameters cannot drift apart;
    - a view with `partial_patch = False` takes a complete body on PATCH (reschedule), not any subset;
    - no `format` query parameter for views with several renderers (Accept chooses);
    - money and other decimals are JSON numbers: `format: decimal` with `x-decimal-places` their places;
    - a component's description is its `openapi_description`, never a developer docstring (inherited
      ones included: every request body would otherwise describe StrictSerializer's internals);
    - an operation's description is its handler's docstring (`list`, `create`, an `@action`, or a plain
      view's `get`), never the class's: a ViewSet's docstring is a note for developers;
    - request bodies say what StrictSerializer enforces (`additionalProperties: false`), and a
      serializer's `required_unless` rule becomes one body schema per case (a oneOf with a discriminator).
    """

    def get_description(self) -> str:  # type: ignore[override] # drf-spectacular's signature
        handler = getattr(self.view, getattr(self.view, "action", None) or self.method.lower(), None)
        doc = getattr(handler, "__doc__", None)
        if not doc:
            return ""
        # A docstring's line breaks are only its width: each paragraph becomes one line of Markdown.
        return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(doc).split("\n\n"))

    def get_override_parameters(self) -> list[Any]:
        return [*declared_query_params(self.view, self.method), *super().get_override_parameters()]

    def _get_format_parameters(self) -> list[Any]:
        # DRF's `?format=` is no parameter of this API (ClinicAPIView refuses undeclared parameters): the
        # representation is chosen by Accept alone (the invoice detail's PDF).
        return []

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        if self.method == "PATCH" and not getattr(self.view, "partial_patch", True):
            self.method = "POST"  # drf-spectacular marks every PATCH body partial; this one is not
            try:
                return super()._get_request_for_media_type(serializer, direction)
            finally:
                self.method = "PATCH"
        return super()._get_request_for_media_type(serializer, direction)

    def _get_response_for_code(
        self, serializer: Any, status_code: Any, media_types: Any = None, direction: str = "response"
    ) -> Any:
        # An error response declared by its description only still has a problem body (and so keeps the
        # operation's examples for that status).
        if str(status_code)[0] in "45":
            problem = {"$ref": "#/components/schemas/Problem"}
            if serializer is None:
                serializer = problem
            elif isinstance(serializer, OpenApiResponse) and serializer.response is None:
                serializer = OpenApiResponse(problem, serializer.description, serializer.examples)
        return super()._get_response_for_code(serializer, status_code, media_types, direction)

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.ListSerializer | serializers.ListField) and schema.get("type") == "array":
            min_length, max_length = getattr(field, "min_length", None), getattr(field, "max_length", None)
            if min_length is not None:
                schema["minItems"] = min_length
            if max_length is not None:
                schema["maxItems"] = max_length
        types = schema.get("type")
        if isinstance(field, serializers.DecimalField) and "number" in (types if isinstance(types, list) else [types]):
            # Not `multipleOf: 0.01`: standard validators test it in binary floating point and refuse 36.09
            # or 0.07 as they parse them (docs/api-rules.md §1.4). The places are an extension instead.
            schema["format"] = "decimal"
            schema["x-decimal-places"] = field.decimal_places or 0
        return schema

    def _map_basic_serializer(self, serializer: Any, direction: str) -> Any:
        schema = super()._map_basic_serializer(serializer, direction)
        schema.pop("description", None)
        description = type(serializer).__dict__.get("openapi_description")
        if description:
            schema["description"] = description
        if direction != "request":
            return schema
        # Only with properties: a body-less action's StrictSerializer (EmptyBody) stays undocumented as a body.
        if isinstance(serializer, StrictSerializer) and schema.get("properties"):
            schema["additionalProperties"] = False
        rule = getattr(serializer, "required_unless", None)
        if isinstance(rule, RequiredUnless):
            return self._one_schema_per_case(serializer, schema, rule)
        return schema

    def _one_schema_per_case(self, serializer: Any, schema: dict[str, Any], rule: RequiredUnless) -> dict[str, Any]:
        """`{"oneOf": [<exempt case>, <other case>], "discriminator": ...}`, each case a component whose `field`
        is the enum of its values (named by ENUM_NAME_OVERRIDES) and the other case's `required` fields
        required and not blank."""
        name = self._get_serializer_name(serializer, "request")
        values = [str(value) for value in serializer.fields[rule.field].choices]
        cases = [
            (rule.exempt_name, [v for v in values if v in rule.exempt], ()),
            (rule.other_name, [v for v in values if v not in rule.exempt], rule.required),
        ]
        refs, mapping = [], {}
        for prefix, case_values, required in cases:
            case = copy.deepcopy(schema)
            case["properties"][rule.field] = {"type": "string", "enum": case_values}
            for field in required:
                # The server strips the text: blank or spaces alone are refused like a missing field.
                case["properties"][field].update({"minLength": 1, "pattern": r"\S"})
            case["required"] = sorted({*case.get("required", []), *required})
            component = ResolvedComponent(
                name=prefix + name, type=ResolvedComponent.SCHEMA, object=prefix + name, schema=case
            )
            self.registry.register_on_missing(component)
            refs.append(component.ref)
            mapping.update({value: component.ref["$ref"] for value in case_values})
        return {
            "oneOf": refs,
            "discriminator": {"propertyName": rule.field, "mapping": mapping},
            "description": f"{', '.join(f'`{f}`' for f in rule.required)} is required for every `{rule.field}` but "
            f"{' and '.join(f'`{v}`' for v in rule.exempt)}: one body schema for each case.",
        }


class ApiClientAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "clinic.api.authentication.ApiClientAuthentication"
    name = SECURITY_SCHEME

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "oauth2",
            "description": "OAuth 2.0 client credentials. Every operation requires exactly one scope.",
            "flows": {"clientCredentials": {"tokenUrl": "/api/v1/auth/token", "scopes": SCOPES}},
        }

    def get_security_requirement(self, auto_schema: Any) -> dict[str, list[str]]:
        return {SECURITY_SCHEME: [required_scope(auto_schema.view, auto_schema.method)]}


def pagination_parameters() -> list[OpenApiParameter]:
    """The response headers that carry a list's totals and links (the `page` and `per_page` query
    parameters come from clinic.api.pagination.PageParams in the view's `query_params`)."""
    return [
        OpenApiParameter(
            "X-Total-Count",
            OpenApiTypes.INT,
            location=OpenApiParameter.HEADER,
            response=[200],
            required=True,
            description="Number of matching items.",
        ),
        OpenApiParameter(
            "Link",
            OpenApiTypes.STR,
            location=OpenApiParameter.HEADER,
            response=[200],
            required=True,
            description='RFC 8288 links with rel="first", "prev", "next" and "last".',
        ),
    ]


def location_header(template: str) -> OpenApiParameter:
    """The `Location` of a 201: the new resource's path."""
    return OpenApiParameter(
        "Location",
        OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        response=[201],
        required=True,
        description=f"Path of the new resource: `{template}`.",
    )


def list_responses(item: type) -> dict[int, OpenApiResponse]:
    """200 with a bare JSON array of `item`: a representation (a TypedDict, see clinic.api.shapes) or a
    serializer class."""
    array = item(many=True) if issubclass(item, serializers.BaseSerializer) else shape(item, many=True)
    return {200: OpenApiResponse(array, description="A bare JSON array; totals and links in headers.")}


def path_id(description: str) -> OpenApiParameter:
    """The `{id}` of a detail path, with what it accepts."""
    return OpenApiParameter("id", str, OpenApiParameter.PATH, description=description)


# --- Example helpers every app's api/schema.py builds its examples with


def example(name: str, value: Any, status_code: str = "200") -> OpenApiExample:
    """A response example of one status."""
    return OpenApiExample(name, response_only=True, status_codes=[status_code], value=value)


def request_example(name: str, value: Any) -> OpenApiExample:
    return OpenApiExample(name, request_only=True, value=value)


def problem_body(status_code: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """A problem+json body as the API answers it (with an example request id)."""
    return {
        "type": f"/api/v1/problems/{code}",
        "title": title,
        "status": status_code,
        "detail": detail,
        "code": code,
        "request_id": "6f1d2c3b4a5e4f60a1b2c3d4e5f60718",
        **extra,
    }


def error_example(name: str, problem: dict[str, Any]) -> OpenApiExample:
    """A problem body as the example of its status on the operation's error response."""
    return OpenApiExample(name, response_only=True, status_codes=[str(problem["status"])], value=problem)

"""clinic.api.pagination: a list called without any query parameter takes its params' validated defaults from
a per-class cache, but only for params classes whose empty validation cannot vary."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from clinic.api import pagination
from clinic.api.pagination import HeaderPagination


def _request(query: str = "") -> Request:
    return Request(APIRequestFactory().get(f"/api/v1/things{query}"))


class Plain(serializers.Serializer):
    state = serializers.CharField(required=False)
    active = serializers.BooleanField(default=True)
    kinds = serializers.ListField(child=serializers.CharField(), default=list)  # a callable default


class Static(serializers.Serializer):
    state = serializers.CharField(required=False)
    active = serializers.BooleanField(default=True)


class WithValidate(serializers.Serializer):
    active = serializers.BooleanField(default=True)
    calls = 0

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        type(self).calls += 1
        return {**attrs, "at": timezone.now()}


class Required(serializers.Serializer):
    branch_id = serializers.UUIDField()


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    pagination._EMPTY_QUERY.clear()
    yield
    pagination._EMPTY_QUERY.clear()


def test_no_query_gives_the_defaults_validated_once_per_class(settings: Any) -> None:
    first = HeaderPagination(_request(), Static(data=_request().query_params))
    assert (first.page, first.per_page, first.filters) == (1, settings.API_PAGE_SIZE_DEFAULT, {"active": True})
    assert pagination._EMPTY_QUERY[Static] == {"active": True}
    assert list(pagination._EMPTY_QUERY) == [Static]
    first.filters.pop("active")  # a caller's pops do not reach the cache
    second = HeaderPagination(_request(), Static(data=_request().query_params))
    assert second.filters == {"active": True}


def test_classes_whose_empty_validation_can_vary_are_validated_every_time() -> None:
    for params in (Plain, WithValidate):
        HeaderPagination(_request(), params(data=_request().query_params))
        assert pagination._EMPTY_QUERY[params] is None
    before = WithValidate.calls
    results = [HeaderPagination(_request(), WithValidate(data=_request().query_params)).filters for _ in range(2)]
    assert WithValidate.calls == before + 2
    assert results[0]["at"] != results[1]["at"]
    assert HeaderPagination(_request(), Plain(data=_request().query_params)).filters == {"active": True, "kinds": []}


def test_a_required_parameter_is_still_a_400_without_a_query() -> None:
    for _ in range(2):
        with pytest.raises(ValidationError) as refused:
            HeaderPagination(_request(), Required(data=_request().query_params))
        assert set(refused.value.detail) == {"branch_id"}


def test_any_query_parameter_is_validated_as_before(settings: Any) -> None:
    HeaderPagination(_request(), Static(data=_request().query_params))
    given = HeaderPagination(_request("?state=KA&per_page=5"), Static(data=_request("?state=KA").query_params))
    assert (given.page, given.per_page, given.filters) == (1, 5, {"state": "KA", "active": True})
    with pytest.raises(ValidationError) as refused:
        HeaderPagination(_request("?page=0"), Static(data=_request("?page=0").query_params))
    assert set(refused.value.detail) == {"page"}


def test_a_field_validator_method_makes_a_class_validated_every_time() -> None:
    class WithFieldHook(serializers.Serializer):
        active = serializers.BooleanField(default=True)

        def validate_active(self, value: bool) -> bool:
            return value

    HeaderPagination(_request(), WithFieldHook(data=_request().query_params))
    assert pagination._EMPTY_QUERY[WithFieldHook] is None


def test_the_api_lists_params_classes_without_hooks_are_cached() -> None:
    from clinic.api.organisation import BranchListParams, DoctorListParams

    for params in (BranchListParams, DoctorListParams):
        HeaderPagination(_request(), params(data=_request().query_params))
        assert pagination._EMPTY_QUERY[params] == {}


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?page=2&per_page=3",
        "?state=Karnataka&state=Kerala&blank=&z=1&a=2",
        "?name=%E0%A4%85%E0%A4%A8%E0%A4%BF%E0%A4%B2+kumar&per_page=3&page=3",
        "?q=a%2Bb%26c%3Dd&page=9",
        "?flag&page=1",
    ],
)
def test_link_headers_are_what_drfs_replace_query_param_made(query: str) -> None:
    from rest_framework.utils.urls import replace_query_param

    request = _request(query)
    paged = HeaderPagination(request)
    paged.total = 10
    headers = paged.headers()
    last = max(-(-paged.total // paged.per_page), 1)
    url = replace_query_param(request.build_absolute_uri(), "per_page", paged.per_page)
    links = [("first", 1), ("last", last)]
    if paged.page > 1:
        links.insert(1, ("prev", min(paged.page - 1, last)))
    if paged.page < last:
        links.insert(-1, ("next", paged.page + 1))
    expected = ", ".join(f'<{replace_query_param(url, "page", page)}>; rel="{rel}"' for rel, page in links)
    assert headers == {"X-Total-Count": "10", "Link": expected}

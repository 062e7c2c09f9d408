"""The two-branch world (two_branches.py) of the suites that run every operation, seeded once per module.

`shared_world` seeds it inside a transaction of the module's own, opened before the module's first test that
asks for `world` and rolled back after the module's last test: each test's transaction (pytest-django's
`db`, a Django TestCase) nests in it as a savepoint, rolled back after the test, so every test starts from the
world exactly as seeded, and nothing of it is ever committed: no other module sees one of its rows or a
counter it moved (sequences aside, which PostgreSQL never rolls back, as for any test). A transactional test
(`transaction=True`, `transactional_db`, `live_server`) would run inside that transaction (nothing it writes
committed for another connection to see) and then flush the tables and close the connection under it, so a
module that uses `world` may have none: `shared_world` refuses to start in one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import Client, override_settings

from tests.appointments.lifecycle_helpers import start_now
from tests.clinic.two_branches import World, seed_world

TRANSACTIONAL_FIXTURES = {"transactional_db", "live_server", "django_db_reset_sequences"}


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    marked = marker is not None and any(marker.kwargs.get(name) for name in ("transaction", "reset_sequences"))
    return marked or bool(TRANSACTIONAL_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.fixture(scope="module")
def shared_world(request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    transactional = [
        item.nodeid
        for item in request.session.items
        if getattr(item, "module", None) is request.module and _transactional(item)
    ]
    if transactional:
        pytest.fail(f"{request.module.__name__} uses the shared world and has transactional tests: {transactional}")
    with django_db_blocker.unblock():
        module_transaction = transaction.atomic()
        module_transaction._from_testcase = True  # a durable atomic block may open inside it, as in a test's
        module_transaction.__enter__()
    try:
        # As tests/conftest.py's `_test_hosts` (a function fixture) sets for every test.
        hosts = override_settings(
            ALLOWED_HOSTS=["testserver", "localhost", "127.0.0.1"], ANONYMOUS_RATE_LIMIT=1_000_000
        )
        with django_db_blocker.unblock(), hosts:
            world = seed_world(Client())
        yield world
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            module_transaction.__exit__(None, None, None)


@pytest.fixture
def world(shared_world: World, db: None) -> World:
    """The shared world as a test's own: copies of its objects (a test may change one in memory, or through a
    service that saves it, and its transaction rolls back only the rows), and the appointment that started a
    minute ago moved to a minute before this test, as seeding it afresh would."""
    own = copy.deepcopy(shared_world)
    for site in (own.home, own.other):
        site.started = start_now(site.started.id)
    return own

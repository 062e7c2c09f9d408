"""Celery beat (clinic.beat.ClinicScheduler): one active beat with a lock in Redis, a standby that stays
idle and takes over when the active one stops, and schedule state in Redis that survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from clinic import beat
from clinic.celery import app as celery_app
from clinic.heartbeat import heartbeats_fresh, redis_connection

HOURLY = {"purge-idempotency-records": {"task": "integrations.tasks.purge_idempotency_records", "schedule": 3600.0}}


@pytest.fixture
def schedulers(monkeypatch: Any) -> Iterator[list[beat.ClinicScheduler]]:
    previous = celery_app.conf.beat_schedule
    celery_app.conf.beat_schedule = HOURLY
    connection = redis_connection()
    connection.delete(beat._key("lock"), beat._key("state"))
    made: list[beat.ClinicScheduler] = []
    yield made
    for scheduler in made:
        scheduler.close()
    celery_app.conf.beat_schedule = previous
    connection.delete(beat._key("lock"), beat._key("state"))


def _sent(scheduler: beat.ClinicScheduler) -> list[str]:
    sent: list[str] = []
    scheduler.apply_async = lambda entry, **kwargs: sent.append(entry.name)  # type: ignore[method-assign]
    return sent


def test_of_two_beats_one_is_active_and_the_other_stands_by_and_sends_nothing(schedulers: list[Any]) -> None:
    first = beat.ClinicScheduler(app=celery_app)
    second = beat.ClinicScheduler(app=celery_app)
    schedulers += [first, second]
    due = datetime.now(UTC) - timedelta(hours=2)
    for scheduler in (first, second):
        scheduler.schedule["purge-idempotency-records"].last_run_at = due
    sent_first, sent_second = _sent(first), _sent(second)

    first.tick()
    second.tick()

    assert (first.active, second.active) == (True, False)
    assert sent_first == ["purge-idempotency-records"]
    assert sent_second == []
    assert set(heartbeats_fresh(role="beat")) >= {first.node, second.node}  # both alive for their probes


def test_the_standby_takes_over_when_the_active_beat_stops_and_does_not_repeat_its_runs(
    schedulers: list[Any],
) -> None:
    first = beat.ClinicScheduler(app=celery_app)
    second = beat.ClinicScheduler(app=celery_app)
    schedulers += [first, second]
    for scheduler in (first, second):  # due on both, as far as each knows
        scheduler.schedule["purge-idempotency-records"].last_run_at = datetime.now(UTC) - timedelta(hours=2)
    sent_first, sent_second = _sent(first), _sent(second)
    first.tick()
    second.tick()
    assert sent_first == ["purge-idempotency-records"]

    first.close()  # a clean stop releases the lock
    second.tick()
    second.tick()

    assert second.active is True
    assert sent_second == []  # it ran a moment ago on the first beat: the state says so


def test_a_restarted_beat_knows_when_each_task_last_ran(schedulers: list[Any]) -> None:
    before = beat.ClinicScheduler(app=celery_app)
    schedulers.append(before)
    new = datetime.now(UTC)
    before.tick()  # takes the lock; a new entry's last run is "now": not due for an hour
    last_run = before.schedule["purge-idempotency-records"].last_run_at
    before.close()

    after = beat.ClinicScheduler(app=celery_app)
    schedulers.append(after)

    assert after.schedule["purge-idempotency-records"].last_run_at == last_run
    assert last_run <= new


def test_a_beat_whose_lock_expired_in_redis_is_replaced_by_the_standby(schedulers: list[Any]) -> None:
    first = beat.ClinicScheduler(app=celery_app)
    second = beat.ClinicScheduler(app=celery_app)
    schedulers += [first, second]
    first.tick()
    redis_connection().delete(beat._key("lock"))  # the active beat died: its lock ran out

    second.tick()
    first.tick()

    assert (first.active, second.active) == (False, True)

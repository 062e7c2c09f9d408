"""When a failed delivery is tried again (docs/api-rules.md §8).

After the first attempt fails, the next ones come 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h later, each
delay spread by +-20 % so that a receiver coming back up is not hit by every delivery at the same second.
A Retry-After from the receiver (seconds or an HTTP date) postpones the next attempt, up to
WEBHOOK_RETRY_AFTER_MAX_SECONDS; it never brings it forward. After the eighth attempt the delivery fails.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

RETRY_DELAYS = (
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
    timedelta(hours=10),
)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.2

_random = random.SystemRandom()


def retry_after_parse(value: str | None, *, now: datetime) -> timedelta | None:
    """The wait a Retry-After header asks for: delay-seconds or an HTTP date. None when absent or invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return timedelta(seconds=min(int(value), 10**8))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP dates are GMT
    return max(when - now, timedelta(0))


def retry_delay(attempts_made: int, *, retry_after: timedelta | None, retry_after_max: timedelta) -> timedelta | None:
    """The wait before the next attempt after `attempts_made` attempts failed; None when none is left."""
    if attempts_made >= MAX_ATTEMPTS:
        return None
    delay = RETRY_DELAYS[attempts_made - 1] * _random.uniform(1 - JITTER, 1 + JITTER)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_max))
    return delay

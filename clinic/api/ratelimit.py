"""Per-client request rate limit over a rolling minute, enforced atomically in Redis.

A sliding log (one sorted-set member per admitted request) decides in a single Lua script, so any number
of concurrent workers can never admit more than the limit within any 60-second window. Refused requests
are not recorded, so a client that backs off recovers as its old requests age out. Without Redis
(REDIS_URL empty, development only) an in-process log with a lock gives the same semantics for one
process.

With Redis configured but not answering, the API keeps serving (docs/operations.md §1): decisions fall back to
that in-process log, a per-process approximation (N processes admit up to N times the limit), with one
warning when the outage starts, one line when it ends, and clinic_ratelimit_fallback_total counting the
decisions. For a few seconds after a failure Redis is not tried again, so a Redis that hangs rather than
refuses does not add its timeout to every request.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from functools import cache
from typing import Any

import redis
from django.conf import settings

import clinic.metrics as metrics

logger = logging.getLogger("clinic.api.ratelimit")

WINDOW_SECONDS = 60

# KEYS[1] log key; ARGV: limit, window (s), unique member, record ("1": count this request, "0": only
# look). Returns {admitted, count, reset_ms}.
_SLIDING_LOG = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2]) * 1000
local limit = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local admitted = 0
if count < limit then
  admitted = 1
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[1], now, ARGV[3])
    count = count + 1
  end
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reset = 0
if oldest[2] then reset = tonumber(oldest[2]) + window - now end
return {admitted, count, reset}
"""


@dataclass(frozen=True)
class RateLimitDecision:
    admitted: bool
    limit: int
    remaining: int
    reset_seconds: int  # until the oldest counted request leaves the window

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }


@cache
def _redis_script() -> Any:
    # Short timeouts: a rate-limit decision is on every request's path.
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.5, socket_connect_timeout=0.5)
    return client.register_script(_SLIDING_LOG)


# While Redis is known to be down: the monotonic time before which it is not tried again.
RETRY_REDIS_AFTER_SECONDS = 5.0
_redis_down_until: float | None = None


_local_lock = threading.Lock()
_local_logs: dict[str, deque[float]] = defaultdict(deque)


def _local_hit(key: str, limit: int, record: bool) -> tuple[bool, int, float]:
    now = time.monotonic()
    with _local_lock:
        log = _local_logs[key]
        while log and log[0] <= now - WINDOW_SECONDS:
            log.popleft()
        admitted = len(log) < limit
        if admitted and record:
            log.append(now)
        reset_ms = (log[0] + WINDOW_SECONDS - now) * 1000 if log else 0
        return admitted, len(log), reset_ms


def hit(client_key: str, limit: int, *, record: bool = True) -> RateLimitDecision:
    """Count one request for the client if its limit allows, and say what the client may still send.
    With record=False only look (for the headers of a request refused before the limit applies)."""
    key = f"{settings.CACHES['default'].get('KEY_PREFIX', 'clinic')}:ratelimit:{client_key}"
    shared = _shared_hit(key, limit, record) if settings.REDIS_URL else None
    if shared is not None:
        admitted, count, reset_ms = shared
    else:
        admitted, count, reset_ms = _local_hit(key, limit, record)
    return RateLimitDecision(
        admitted=admitted,
        limit=limit,
        remaining=max(limit - int(count), 0),
        reset_seconds=max(math.ceil(float(reset_ms) / 1000), 1 if not admitted else 0),
    )


def _shared_hit(key: str, limit: int, record: bool) -> tuple[bool, int, float] | None:
    """The decision from Redis, or None while Redis does not answer (the caller decides locally)."""
    global _redis_down_until
    if _redis_down_until is not None and time.monotonic() < _redis_down_until:
        metrics.RATELIMIT_FALLBACK.inc()
        return None
    member = f"{time.time_ns()}-{secrets.token_hex(4)}"
    try:
        admitted_flag, count, reset_ms = _redis_script()(
            keys=[key], args=[limit, WINDOW_SECONDS, member, "1" if record else "0"]
        )
    except redis.RedisError as exc:
        if _redis_down_until is None:
            logger.warning(
                "Redis unavailable (%s): rate limits fall back to a per-process approximation", type(exc).__name__
            )
        _redis_down_until = time.monotonic() + RETRY_REDIS_AFTER_SECONDS
        metrics.RATELIMIT_FALLBACK.inc()
        metrics.REDIS_UNAVAILABLE.labels(user="ratelimit").inc()
        return None
    if _redis_down_until is not None:
        _redis_down_until = None
        logger.warning("Redis answers again: rate limits are shared across processes again")
    return bool(admitted_flag), int(count), float(reset_ms)

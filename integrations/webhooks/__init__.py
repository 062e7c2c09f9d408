"""Outbound webhooks: subscriptions, the transactional outbox and its delivery by Celery workers.

- `registry`: the event kinds, each registered by the domain app that publishes it.
- `signing`: Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature).
- `targets`: SSRF protection, the target URL rules checked on save and the address check at send time.
- `transport`: one HTTP attempt, connected to the address that was checked (no DNS-rebinding window).
- `schedule`: the retry schedule, jitter and Retry-After.
- `delivery`: claiming deliveries (SELECT ... FOR UPDATE SKIP LOCKED, leases), attempts and the relay.
- `services`: writes used by the admin, the management command and event publication.

Publication itself is `integrations.webhooks.events.event_publish`, called by the domain apps in their transaction.
"""

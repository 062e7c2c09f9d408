"""HL7 v2.5.1 over MLLP (docs/hl7-outbound.md, docs/hl7-inbound.md).

Outbound, from the same outbox as webhooks: `outbox` writes one Hl7Message per matching active destination
in the transaction of the event (integrations.webhooks.events calls it), and sends them one at a time per
destination in event order under a per-destination lease (`outbox`, `client`), building each message with
hl7apy (`messages`). Inbound: `listener` (manage.py hl7_listener) accepts ORU^R01 over MLLP (`mllp`) and
applies the results through the lab results service (`inbound`).
"""

"""CPU per ORU^R01 message of the HL7 results path, in-process (no MLLP, no listener threads).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/hl7_cpu.py [--messages 60] [--runs 2]

Each run makes a fresh collected order per message (a 10-analyte panel with a reference range each, as
bench/hl7.py makes its data), calls `integrations.hl7.inbound.message_handle` once for warm-up and then on
every message, and reports `time.process_time` (this process's user + system CPU; PostgreSQL's own CPU is
not counted, so load elsewhere on the machine inflates it little) per message and the SQL statements per
message. Every ACK must be AA. To compare two trees, copy this script into both and alternate the runs on
one database (bench/results/plans_retired.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
os.environ["DEBUG"] = "false"
os.environ.setdefault("LOG_LEVEL", "WARNING")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=60)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection
    from harness import OruWorld

    from integrations.hl7.inbound import message_handle

    world = OruWorld("bench-cpu")

    def oru(n: int) -> bytes:
        return world.oru(n, world.collected_accession()).encode()

    statements = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    per_run = []
    for run in range(args.runs):
        messages = [oru(run * 1000 + n) for n in range(args.messages + 1)]
        assert "|AA|" in message_handle(messages[0], peer="127.0.0.1")
        statements = 0
        with connection.execute_wrapper(count):
            start = time.process_time()
            for message in messages[1:]:
                ack = message_handle(message, peer="127.0.0.1")
                assert "|AA|" in ack, ack
            spent = time.process_time() - start
        per_run.append(spent / args.messages * 1000)
        print(f"run {run + 1}: {per_run[-1]:.2f} ms CPU per message, {statements / args.messages:.1f} statements")
    print(f"mean {statistics.mean(per_run):.2f} ms CPU per message")
    return 0


if __name__ == "__main__":
    sys.exit(main())

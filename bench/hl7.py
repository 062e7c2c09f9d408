"""HL7 v2 over MLLP: ORU^R01 ingest by the listener and outbound throughput to a local receiver.

    .venv/bin/python bench/hl7.py [--oru 300] [--connections 4] [--processes 1 2] [--outbound 1000]

Uses its own database (clinic_bench_hl7). Short on purpose (the development machine is shared):
- ingest: the real listener (`manage.py hl7_listener`, 4 database threads; with `--processes N`, N worker
  processes of 4 threads each behind the accepting one) in its own process, a run for each `--processes`
  count (default 1, then 2: one process is bound to one core by its interpreter lock); `--connections` client connections each send ORU^R01 messages one after the other (each waits for its ACK, as MLLP does),
  every message carrying 10 results for its own collected order; every ACK must be AA.
- outbound: `--outbound` appointment events published (each writes its HL7 message with the event), then one
  drain sends them in order over one MLLP connection to a local receiver answering AA at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import RESULTS, ROOT, OruWorld, free_port, percentile, prepare

VT, FS = b"\x0b", b"\x1c\r"


def mllp_exchange(sock: socket.socket, text: str) -> bytes:
    sock.sendall(VT + text.encode() + FS)
    data = b""
    while not data.endswith(FS):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def ack_receiver(port: int, stop: threading.Event) -> None:
    """A minimal MLLP receiver answering AA to every message with its control id."""

    def serve(conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
                while FS in buffer:
                    frame, buffer = buffer.split(FS, 1)
                    msh = frame.lstrip(VT).split(b"\r", 1)[0].split(b"|")
                    ack = (
                        b"MSH|^~\\&|RCV|RCV|CLINIC|CLINIC|20260101||ACK^S12^ACK|A"
                        + msh[9]
                        + b"|P|2.5.1\rMSA|AA|"
                        + msh[9]
                        + b"\r"
                    )
                    conn.sendall(VT + ack + FS)

    with socket.create_server(("127.0.0.1", port)) as server:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()


def _cpu_seconds_by_process(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) used so far by `pid` and its descendants (the listener and its workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found[current] = (int(fields[11]) + int(fields[12])) / ticks
        pending += [int(child) for child in children]
    return found


def ingest(count: int, connections: int, processes: int) -> dict[str, Any]:
    world = OruWorld("bench")
    accessions = [world.collected_accession() for _ in range(count)]
    oru = world.oru

    port = free_port()
    # The listener as the hl7-listener role runs it: its own process(es), so the clients here take none of its
    # CPU (or interpreter lock).
    command = [
        sys.executable, "manage.py", "hl7_listener", "--host", "127.0.0.1", "--port", str(port),
        "--processes", str(processes), "--threads", "4",
    ]  # fmt: skip
    if profile := os.environ.get("HL7_BENCH_PROFILE"):
        # py-spy's raw (collapsed) stacks of the listener and its children, sampled while holding the GIL.
        command = [
            "py-spy",
            "record",
            "--subprocesses",
            "--gil",
            "-r",
            "500",
            "-f",
            "raw",
            "-o",
            profile,
            "--",
            *command,
        ]
    # All the clients come from 127.0.0.1: the per-address limit (default 4) must let every one of them in, and
    # the probe that saw the listener start may not be closed on its side yet.
    per_address = os.environ.get("HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS") or str(max(4, connections + 2))
    listener = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": "WARNING", "HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS": per_address},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if listener.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the listener did not start") from None
            time.sleep(0.2)
    latencies: list[float] = []
    codes: dict[str, int] = {}
    lock = threading.Lock()

    def client(part: list[tuple[int, str]]) -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            for n, accession in part:
                started = time.perf_counter()
                ack = mllp_exchange(sock, oru(n, accession))
                took = (time.perf_counter() - started) * 1000
                ack_code = ack.split(b"MSA|", 1)[1][:2].decode()
                with lock:
                    latencies.append(took)
                    codes[ack_code] = codes.get(ack_code, 0) + 1

    work = list(enumerate(accessions))
    parts = [work[i::connections] for i in range(connections)]
    cpu_before = _cpu_seconds_by_process(listener.pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(client, parts))
    elapsed = time.perf_counter() - started
    cpu_after = _cpu_seconds_by_process(listener.pid)
    cpu = sorted((round(cpu_after[pid] - cpu_before.get(pid, 0.0), 1) for pid in cpu_after), reverse=True)
    if profile:
        subprocess.run(["pkill", "-TERM", "-P", str(listener.pid)], check=False)  # py-spy writes when it exits
    else:
        listener.send_signal(signal.SIGTERM)
    listener.wait(30)
    return {
        "run": f"ORU^R01 ingest, 10 results each, {connections} connections, {processes} listener process(es)",
        "messages": count,
        "per_s": round(count / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "acks": codes,
        # The listener's processes (the accepting one and its workers, py-spy's too when profiling), busiest first.
        "cpu_seconds_by_process": cpu,
    }


def outbound(count: int) -> dict[str, Any]:
    from django.db import transaction

    from integrations.hl7 import outbox
    from integrations.hl7.models import Hl7Destination, Hl7Message
    from integrations.webhooks.events import event_publish

    Hl7Message.objects.all().delete()
    Hl7Destination.objects.all().delete()
    stop = threading.Event()
    port = free_port()
    threading.Thread(target=ack_receiver, args=(port, stop), daemon=True).start()
    time.sleep(0.3)
    destination = Hl7Destination.objects.create(
        name="bench", host="127.0.0.1", port=port, event_types=["appointment.booked"], receiving_application="RCV"
    )
    payload = {
        "appointment": {
            "appointment_id": "6f1c5a0e-0000-4000-8000-000000000001",
            "patient_id": "PAT-000001",
            "patient": {"id": "6f1c5a0e-0000-4000-8000-000000000002", "name": "Asha Rao"},
            "doctor": {"id": "6f1c5a0e-0000-4000-8000-000000000003", "name": "Dr Ravi Kumar", "department": "General"},
            "slot_start": "2026-12-01T09:00:00+05:30",
            "slot_end": "2026-12-01T09:15:00+05:30",
            "visit_type": "consultation",
        }
    }
    original = outbox.drains_enqueue
    setattr(outbox, "drains_enqueue", lambda *args, **kwargs: None)  # noqa: B010 - this bench drains itself
    try:
        with transaction.atomic():
            for _ in range(count):
                event_publish(event_type="appointment.booked", payload=payload)
    finally:
        setattr(outbox, "drains_enqueue", original)  # noqa: B010
    started = time.perf_counter()
    result = outbox.destination_drain(destination_id=destination.pk, budget_seconds=600)
    elapsed = time.perf_counter() - started
    stop.set()
    return {
        "run": "outbound SIU^S12 to a local receiver, one destination, in order",
        "messages": result.acknowledged,
        "per_s": round(result.acknowledged / elapsed, 1),
        "p50_ms": None,
        "p95_ms": None,
        "acks": {"AA": result.acknowledged, "not acknowledged": count - result.acknowledged},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--oru", type=int, default=300)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="Listener processes, a run each.")
    parser.add_argument("--outbound", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["DEBUG"] = "false"  # as production runs: no query log kept per connection
    server = prepare(database="clinic_bench_hl7")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)
    rows = [ingest(args.oru, args.connections, processes) for processes in args.processes]
    rows.append(outbound(args.outbound))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hl7.json").write_text(json.dumps(rows, indent=2))
    lines = ["| run | messages | messages/s | p50 ms | p95 ms | ACKs |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['run']} | {r['messages']} | {r['per_s']} | {r['p50_ms'] or '-'} | {r['p95_ms'] or '-'} | {r['acks']} |"
        for r in rows
    ]
    print("\n".join(lines))
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())

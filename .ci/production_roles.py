"""The HTTP parts of .ci/production_roles, run with the venv built from requirements.txt alone (it needs only
the standard library, `requests` and `standardwebhooks`, which requirements.txt pins anyway).

    receive --port-file F --secret-file S --log L   an external webhook receiver on 127.0.0.1: verifies each
                                                    delivery's Standard Webhooks signature with the secret in S
                                                    (read per request: it exists only once the subscription
                                                    does) and appends one JSON line per delivery to L
    book --base URL --client-id ID --client-secret SECRET --manifest M
                                                    token over HTTP, a free slot from GET appointments/slots,
                                                    a booking; prints the appointment id
    wait --log L --appointment-id ID --timeout S    until exactly one correctly signed appointment.booked for
                                                    that appointment arrived (and nothing else), or fail
    export --base URL --client-id ID --client-secret SECRET --timeout S
                                                    a FHIR Bulk Data export of every Patient: kick-off, status
                                                    polled until the export-worker role wrote it, the file
                                                    downloaded; prints the number of resources
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import zoneinfo
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests
from standardwebhooks import Webhook


def say(message: str) -> None:
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def receive(args: argparse.Namespace) -> None:
    log = Path(args.log)
    secret_file = Path(args.secret_file)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            record: dict[str, Any] = {"webhook_id": headers.get("webhook-id"), "path": self.path}
            try:
                Webhook(secret_file.read_text().strip()).verify(body, headers)
                record["valid"] = True
            except Exception as exc:  # noqa: BLE001 - any failure is an invalid delivery, recorded as such
                record["valid"] = False
                record["error"] = f"{type(exc).__name__}: {exc}"
            try:
                envelope = json.loads(body)
                record["type"] = envelope.get("type")
                record["appointment_id"] = envelope.get("data", {}).get("appointment", {}).get("appointment_id")
            except (ValueError, AttributeError):
                record["type"] = None
            with log.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            self.send_response(204 if record["valid"] else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_file = Path(args.port_file)
    partial = port_file.with_suffix(".partial")
    partial.write_text(str(server.server_address[1]))
    partial.rename(port_file)  # the script polls for the file: it appears whole
    server.serve_forever()


def book(args: argparse.Namespace) -> None:
    base = args.base.rstrip("/")
    manifest = json.loads(Path(args.manifest).read_text())
    session = requests.Session()
    token = session.post(
        f"{base}/api/v1/auth/token",
        auth=(args.client_id, args.client_secret),
        data={"grant_type": "client_credentials"},
        timeout=10,
    )
    if token.status_code != 200:
        sys.exit(f"token request: {token.status_code} {token.text[:500]}")
    session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    branches = {branch["code"]: branch for branch in manifest["branches"]}
    # A doctor at a single branch: the booking needs no branch choice.
    doctor = next(doctor for doctor in manifest["doctors"] if len(doctor["branches"]) == 1)
    branch = branches[doctor["branches"][0]]
    patients = [patient["patient_id"] for patient in manifest["patients"]]
    today = datetime.datetime.now(zoneinfo.ZoneInfo("Asia/Kolkata")).date()
    attempts = 0
    for days in range(1, 15):  # from tomorrow: no slot is in the past while we book it
        day = today + datetime.timedelta(days=days)
        slots = session.get(
            f"{base}/api/v1/appointments/slots",
            params={"doctor_id": doctor["id"], "branch_id": branch["id"], "date": day.isoformat()},
            timeout=10,
        )
        if slots.status_code != 200:
            sys.exit(f"GET appointments/slots: {slots.status_code} {slots.text[:500]}")
        for slot in slots.json():
            attempts += 1
            booked = session.post(
                f"{base}/api/v1/appointments",
                json={
                    "patient_id": patients[attempts % len(patients)],
                    "doctor_id": doctor["id"],
                    "branch_id": branch["id"],
                    "slot_start": slot["start_time"],
                    "slot_end": slot["end_time"],
                    "notes": "production roles check",
                },
                timeout=10,
            )
            if booked.status_code == 201:
                say(booked.json()["appointment_id"])
                return
            if booked.status_code != 409 or attempts >= 20:
                sys.exit(f"POST appointments: {booked.status_code} {booked.text[:500]}")
    sys.exit(f"no free slot for {doctor['name']} at {branch['code']} in the next two weeks")


def wait(args: argparse.Namespace) -> None:
    log = Path(args.log)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().strip():
            break
        time.sleep(0.2)
    else:
        sys.exit(f"no webhook delivery arrived within {args.timeout} s")
    time.sleep(args.settle)  # a duplicate or a second event would arrive about now
    deliveries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    expected = [
        d
        for d in deliveries
        if d["valid"] and d.get("type") == "appointment.booked" and d.get("appointment_id") == args.appointment_id
    ]
    if len(deliveries) != 1 or len(expected) != 1:
        sys.exit(
            f"expected exactly one correctly signed appointment.booked for {args.appointment_id}, got: "
            + json.dumps(deliveries)
        )
    say(f"webhook {deliveries[0]['webhook_id']}: appointment.booked, signature verified")


def _session(base: str, client_id: str, client_secret: str) -> requests.Session:
    session = requests.Session()
    token = session.post(
        f"{base}/api/v1/auth/token",
        auth=(client_id, client_secret),
        data={"grant_type": "client_credentials"},
        timeout=10,
    )
    if token.status_code != 200:
        sys.exit(f"token request: {token.status_code} {token.text[:500]}")
    session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return session


def export(args: argparse.Namespace) -> None:
    base = args.base.rstrip("/")
    session = _session(base, args.client_id, args.client_secret)
    kickoff = session.get(
        f"{base}/fhir/R4/$export",
        params={"_type": "Patient"},
        headers={"Accept": "application/fhir+json", "Prefer": "respond-async"},
        timeout=10,
    )
    if kickoff.status_code != 202:
        sys.exit(f"export kick-off: {kickoff.status_code} {kickoff.text[:500]}")
    status_url = kickoff.headers["Content-Location"]
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        status = session.get(status_url, timeout=10)
        if status.status_code == 200:
            break
        if status.status_code != 202:
            sys.exit(f"export status: {status.status_code} {status.text[:500]}")
        time.sleep(0.5)
    else:
        sys.exit(f"the export was not written within {args.timeout} s (is the export-worker role consuming?)")
    files = status.json()["output"]
    if [entry["type"] for entry in files] != ["Patient"]:
        sys.exit(f"export manifest: {status.text[:500]}")
    ndjson = session.get(files[0]["url"], timeout=30)
    lines = [line for line in ndjson.text.splitlines() if line.strip()]
    if ndjson.status_code != 200 or not lines or json.loads(lines[0]).get("resourceType") != "Patient":
        sys.exit(f"export file: {ndjson.status_code} {ndjson.text[:300]}")
    say(f"FHIR export written by the export-worker role: {len(lines)} Patient resources")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("receive")
    p.add_argument("--port-file", required=True)
    p.add_argument("--secret-file", required=True)
    p.add_argument("--log", required=True)
    p = commands.add_parser("book")
    p.add_argument("--base", required=True)
    p.add_argument("--client-id", required=True)
    p.add_argument("--client-secret", default=os.environ.get("ROLES_CLIENT_SECRET"))
    p.add_argument("--manifest", required=True)
    p = commands.add_parser("wait")
    p.add_argument("--log", required=True)
    p.add_argument("--appointment-id", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--settle", type=float, default=2)
    p = commands.add_parser("export")
    p.add_argument("--base", required=True)
    p.add_argument("--client-id", required=True)
    p.add_argument("--client-secret", default=os.environ.get("ROLES_CLIENT_SECRET"))
    p.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    {"receive": receive, "book": book, "wait": wait, "export": export}[args.command](args)


if __name__ == "__main__":
    main()

"""manage.py create_dicom_calling_ae (the allow-list from the shell) and manage.py dicom_worklist as its own
process: it serves echoscu and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from integrations.dicom.models import DicomCallingAE
from tests.factories import BranchFactory
from tests.integrations.dicom.conftest import SERVER_AE, free_port
from tests.worker import _test_database_url

ROOT = Path(__file__).resolve().parents[3]


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_dicom_calling_ae", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_create_dicom_calling_ae_allows_then_updates_a_title() -> None:
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM")

    assert run("--ae-title", "CT_ROOM2", "--branch", "blr", "--network", "10.0.0.12", "--network", "10.0.1.0/24") == (
        "Allowed calling AE CT_ROOM2 for branch BLR from 10.0.0.12, 10.0.1.0/24.\n"
    )
    DicomCallingAE.objects.filter(ae_title="CT_ROOM2").update(active=False)
    assert run("--ae-title", "CT_ROOM2", "--branch", str(mum.id), "--host", "10.2.0.7", "--description", "moved") == (
        "Updated calling AE CT_ROOM2 for branch MUM from 10.2.0.7.\n"
    )

    entry = DicomCallingAE.objects.get()
    assert (entry.ae_title, entry.branch, entry.networks, entry.any_address, entry.active, entry.description) == (
        "CT_ROOM2",
        mum,
        ["10.2.0.7"],
        False,
        True,
        "moved",
    )
    assert blr.dicom_calling_aes.count() == 0


@pytest.mark.django_db
def test_create_dicom_calling_ae_from_any_address_needs_saying_so_and_warns() -> None:
    BranchFactory(code="BLR")
    out, err = StringIO(), StringIO()
    call_command(
        "create_dicom_calling_ae", "--ae-title", "CT_ANY", "--branch", "BLR", "--any-address", stdout=out, stderr=err
    )

    assert out.getvalue() == "Allowed calling AE CT_ANY for branch BLR from any address.\n"
    assert err.getvalue() == "Warning: this AE title is accepted from any address.\n"
    entry = DicomCallingAE.objects.get()
    assert (entry.networks, entry.any_address) == ([], True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--ae-title", "CT", "--branch", "BLR"],
            "Give the address the modality connects from (--network IP or CIDR, repeatable), "
            "or --any-address to accept this AE title from anywhere.",
        ),
        (["--ae-title", "CT", "--branch", "NOPE", "--network", "10.0.0.1"], "No branch with id or code 'NOPE'."),
        (
            ["--ae-title", "A\\B", "--branch", "BLR", "--network", "10.0.0.1"],
            "ae_title: 1 to 16 printable ASCII characters, no backslash.",
        ),
        (["--ae-title", "X" * 17, "--branch", "BLR", "--network", "10.0.0.1"], "ae_title:"),
        (["--ae-title", "CT", "--branch", "BLR", "--host", "scanner.local"], "networks:"),
        (["--ae-title", "CT", "--branch", "BLR", "--network", "10.0.0.300/24"], "networks:"),
    ],
)
def test_create_dicom_calling_ae_refuses_bad_input_and_writes_nothing(args: list[str], message: str) -> None:
    BranchFactory(code="BLR")
    with pytest.raises(CommandError) as refused:
        run(*args)
    assert str(refused.value).startswith(message)
    assert DicomCallingAE.objects.count() == 0


def test_the_dicom_worklist_command_serves_and_stops_on_sigterm(world: Any, dcmtk: None) -> None:
    port = free_port()
    # Its start and stop are log lines (JSON here, as with DEBUG off), not command output.
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "LOG_LEVEL": "INFO", "LOG_FORMAT": "json"}
    server = subprocess.Popen(  # noqa: S603 - our own command line
        [sys.executable, "manage.py", "dicom_worklist", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        listening = f"DICOM worklist {SERVER_AE} listening on 127.0.0.1:{port}"
        seen = []
        while listening not in seen and len(seen) < 50:  # every line is JSON; other INFO lines may come first
            seen.append(json.loads(server.stderr.readline())["message"])
        assert listening in seen
        echo = subprocess.run(  # noqa: S603 - a fixed command line
            ["echoscu", "-aet", "BLR_CT1", "-aec", SERVER_AE, "127.0.0.1", str(port)],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert echo.returncode == 0, echo.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert server.wait(30) == 0
    assert time.monotonic() - started < 10
    assert server.stdout is not None
    assert server.stdout.read() == ""
    messages = [json.loads(line)["message"] for line in server.stderr.read().splitlines()]
    assert messages[-1] == "DICOM worklist stopped"

"""The restore drill (docs/backup-and-recovery.md section 5): point-in-time recovery with pgBackRest on a
throw-away cluster, the service started on the restored copy.

1. initdb a cluster on a free port of 127.0.0.1 with docker/backup/postgresql.conf (continuous archiving,
   `archive_command` = `pgbackrest archive-push`) into a pgBackRest repository in a temporary folder
   configured by docker/backup/pgbackrest.conf (the shipped files, with this run's folders and ports; posix,
   no cloud); stanza-create and check, as an operator does once.
2. Migrate the service's schema into it (`manage.py migrate`), ask `/readyz` once (which writes the
   encryption canary, as the first web pod does), take a full base backup.
3. Register patient A through the service's own code (patients.services.patient_create, national ID
   encrypted with a FIELD_ENCRYPTION_KEY of the drill's own), note the server's clock, then register
   patient B; switch the WAL segment and wait until the segment holding B's commit is archived (so B's
   absence below is the recovery target's doing, not a missing WAL). Stop the cluster as a crash would.
4. `pgbackrest restore --type=time --target=<the noted time> --target-action=promote` into a new data
   folder, start it on another port, wait for the promotion.
5. On the restored copy: `manage.py check`, `/readyz` 200 through Django's test client (the canary
   decrypts), A found by its national ID and decrypted, B absent; and with another key `/readyz` 503.

Prints each step's time (the base backup's seconds, and restore + start + replay: the RTO at this size)
and exits 1 on any failure; the folder, both clusters and every process it started are removed whatever
happens (SIGTERM and Ctrl-C included). Needs PostgreSQL 15's binaries (PG_BIN, default
/usr/lib/postgresql/15/bin) and pgbackrest (Debian's package). As root (CI) the clusters and pgBackRest run
as the postgres user, as PostgreSQL requires. CI runs it (.ci/restore_drill); about 30-60 s here.

    .venv/bin/python bench/restore_drill.py [--keep] [--data-mb N] [--wal-mb N]
        --keep: leave the folder (and print it) to look at; --data-mb: N MB of rows before the base backup
        (the backup and restore rates), --wal-mb: N MB of WAL after it (the replay rate); the figures are in
        bench/results/restore_drill.md. CI runs it without either.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import fault_services  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PGBACKREST = shutil.which("pgbackrest") or "/usr/bin/pgbackrest"
STANZA = "clinic"
BACKUP_CONFIG = ROOT / "docker" / "backup"  # the compose deployment's files, which the drill runs
AS_POSTGRES = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[drill {time.monotonic() - STARTED:5.1f}s] {message}", flush=True)


def free_port() -> int:
    """A port nobody listens on, in a range kept clear of the fault suite's (bench/fault_services.py)."""
    return fault_services.free_port(55400, 55499)


class Drill:
    def __init__(self, folder: Path, data_mb: int = 0, wal_mb: int = 0) -> None:
        self.folder = folder
        self.data_mb, self.wal_mb = data_mb, wal_mb
        self.sockets = folder / "sockets"
        self.repo = folder / "repo"
        self.config = folder / "pgbackrest.conf"
        self.primary = folder / "primary"
        self.restored = folder / "restored"
        self.running: list[Path] = []  # data folders of the clusters started
        self.key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
        self.timings: dict[str, float] = {}
        self.port = 0  # the primary's

    # Processes

    def run(self, *command: str, as_postgres: bool = False, env: dict[str, str] | None = None) -> str:
        """Run `command`; its output, or RuntimeError with the output's end."""
        prefix = AS_POSTGRES if as_postgres else []
        result = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}"
            )
        return result.stdout

    def pgbackrest(self, *args: str) -> str:
        return self.run(PGBACKREST, f"--config={self.config}", f"--stanza={STANZA}", *args, as_postgres=True)

    def pg_ctl(self, data: Path, *args: str) -> None:
        log = data.parent / "postgres.log"
        self.run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), *args, as_postgres=True)

    def sql(self, port: int, query: str, database: str = "clinic") -> str:
        return self.run(
            *(str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database),
            *("-v", "ON_ERROR_STOP=1", "-tAc", query),
        ).strip()

    def manage(self, port: int, *args: str, key: str | None = None) -> str:
        env = {
            **os.environ,
            "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/clinic",
            "DATABASE_REPLICA_URL": "",
            "REDIS_URL": "",  # no Redis: the drill is about PostgreSQL (tasks run in-process)
            "FIELD_ENCRYPTION_KEY": key or self.key,
            "SECRET_KEY": "restore-drill-" + secrets.token_urlsafe(32),
            "DATABASE_TRANSACTION_POOLING": "false",
        }
        return self.run(sys.executable, str(ROOT / "manage.py"), *args, env=env)

    def shell(self, port: int, code: str, key: str | None = None) -> Any:
        """Run `code` in `manage.py shell` against the cluster on `port`; the JSON its last line prints."""
        return json.loads(self.manage(port, "shell", "-c", code, key=key).strip().splitlines()[-1])

    # The drill

    def prepare(self) -> None:
        for name in ("sockets", "repo", "primary", "restored", "log", "lock", "spool"):
            (self.folder / name).mkdir()
        if AS_POSTGRES:
            self.folder.chmod(0o755)  # mkdtemp's 0700 would keep the postgres user out
            for path in [self.folder, *self.folder.iterdir()]:
                shutil.chown(path, "postgres", "postgres")
        self.restored.chmod(0o700)
        self.port = free_port()
        # docker/backup/pgbackrest.conf itself (CI proves the shipped file), with this run's folders.
        folders = {
            "repo1-path": self.repo,
            "spool-path": self.folder / "spool",
            "pg1-path": self.primary / "data",
            "pg1-socket-path": self.sockets,
            "pg1-user": "postgres",
            "log-level-console": "warn",
        }
        lines = []
        for line in (BACKUP_CONFIG / "pgbackrest.conf").read_text().splitlines():
            name = line.partition("=")[0].strip()
            lines.append(f"{name}={folders[name]}" if name in folders and not line.startswith("#") else line)
            if line == "[global]":
                lines += [f"log-path={self.folder / 'log'}", f"lock-path={self.folder / 'lock'}"]
            if line == f"[{STANZA}]":
                lines.append(f"pg1-port={self.port}")
        self.config.write_text("\n".join(lines) + "\n")
        if AS_POSTGRES:
            shutil.chown(self.config, "postgres", "postgres")

    def start_primary(self) -> int:
        data = self.primary / "data"
        self.run(
            str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", as_postgres=True
        )
        port = self.port
        with (data / "postgresql.conf").open("a") as conf:
            # docker/backup/postgresql.conf itself, then what this run changes (a later line wins).
            conf.write("\n" + (BACKUP_CONFIG / "postgresql.conf").read_text())
            conf.write(
                "\n# restore drill\n"
                f"port = {port}\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.sockets}'\n"
                f"archive_command = '{PGBACKREST} --config={self.config} --stanza={STANZA} archive-push %p'\n"
                "fsync = off\n"  # a throw-away cluster: speed over durability (never in production)
            )
        self.pg_ctl(data, "-w", "start")
        self.running.append(data)
        self.sql(port, "CREATE DATABASE clinic", database="postgres")
        return port

    def register(self, port: int, label: str, national_id: str) -> dict[str, Any]:
        """Register a patient through patients.services.patient_create (its national ID encrypted)."""
        return self.shell(
            port,
            "import json\n"
            "from datetime import date\n"
            "from clinic.models import Branch\n"
            "from patients.services import patient_create\n"
            "branch, _ = Branch.objects.get_or_create(code='DRILL', defaults={'name': 'Restore drill', 'state': 'Karnataka'})\n"
            f"patient = patient_create(branch=branch, data={{'first_name': 'Drill', 'last_name': {label!r}, "
            f"'date_of_birth': date(1980, 1, 1), 'gender': 'female', 'phone': '+9198{national_id[:8]}', "
            f"'national_id': {national_id!r}}})\n"
            "print(json.dumps({'patient_id': patient.patient_id, 'id': str(patient.id)}))\n",
        )

    def inspect(self, port: int, national_ids: dict[str, str], key: str | None = None) -> Any:
        """/readyz through Django's test client, and each national ID's patients (decrypted)."""
        return self.shell(
            port,
            "import json\n"
            "from django.test import Client\n"
            "from clinic import crypto\n"
            "from patients.models import Patient\n"
            "ready = Client().get('/readyz')\n"
            "found = {}\n"
            f"for label, number in {national_ids!r}.items():\n"
            "    patients = Patient.objects.with_national_id(number)\n"
            "    found[label] = [[p.last_name, crypto.decrypt(p.national_id_encrypted)] for p in patients]\n"
            "print(json.dumps({'readyz': ready.status_code, 'checks': ready.json()['checks'], 'found': found}))\n",
            key=key,
        )

    def write_load(self, port: int, table: str, megabytes: int) -> None:
        """About `megabytes` MB of rows (and as much WAL) into `table`: before the base backup, data the
        restore copies; after it, WAL the restore replays. Their rates give the RTO of a bigger database."""
        since = self.sql(port, "SELECT pg_current_wal_lsn()")
        self.sql(port, f"CREATE TABLE {table} (n integer, filler text)")
        insert = f"INSERT INTO {table} SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 100000) g"  # noqa: S608
        started = time.monotonic()
        while int(self.sql(port, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{since}')")) < megabytes * 2**20:
            self.sql(port, insert)
        say(f"{megabytes} MB written into {table} in {time.monotonic() - started:.1f} s")

    def drill(self) -> None:
        self.prepare()
        port = self.start_primary()
        say(f"primary cluster on 127.0.0.1:{port}, archiving to {self.repo}")
        self.pgbackrest("stanza-create")
        self.pgbackrest("check")  # archive_command works: a WAL segment reached the repository

        started = time.monotonic()
        self.manage(port, "migrate", "--no-input")
        self.timings["migrate"] = time.monotonic() - started
        canary = self.inspect(port, {})
        assert canary["readyz"] == 200, f"readyz on the primary: {canary}"
        say(f"schema migrated in {self.timings['migrate']:.1f} s; /readyz 200 (encryption canary written)")

        if self.data_mb:
            self.write_load(port, "restore_drill_data", self.data_mb)
        started = time.monotonic()
        self.pgbackrest("--type=full", "backup")
        self.timings["base backup"] = time.monotonic() - started
        size = self.sql(port, "SELECT pg_size_pretty(pg_database_size('clinic'))")
        say(f"full base backup in {self.timings['base backup']:.1f} s (database {size})")

        after_backup = self.sql(port, "SELECT pg_current_wal_lsn()")
        if self.wal_mb:
            self.write_load(port, "restore_drill_wal", self.wal_mb)
        national_ids = {"A": "234123412346", "B": "987654321096"}
        a = self.register(port, "Record-A", national_ids["A"])
        target = self.sql(port, "SELECT clock_timestamp()")
        replay_mb = int(self.sql(port, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{after_backup}')")) / 2**20
        time.sleep(1.1)  # B's commit clearly after the target, whatever the clocks' resolution
        b = self.register(port, "Record-B", national_ids["B"])
        b_wal = self.sql(port, "SELECT pg_walfile_name(pg_current_wal_lsn())")
        self.sql(port, "SELECT pg_switch_wal()")
        deadline = time.monotonic() + 60
        while self.sql(port, "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver") < b_wal:
            if time.monotonic() > deadline:
                raise RuntimeError(f"WAL segment {b_wal} (B's commit) not archived within 60 s")
            time.sleep(0.2)
        say(f"A={a['patient_id']} written, target time {target}, B={b['patient_id']} written; {b_wal} archived")
        self.pg_ctl(self.primary / "data", "-m", "immediate", "-w", "stop")
        self.running.remove(self.primary / "data")
        say("primary stopped (immediate: a crash)")

        data = self.restored / "data"
        started = time.monotonic()
        self.pgbackrest(
            f"--pg1-path={data}", "--type=time", f"--target={target}", "--target-action=promote",
            "--archive-mode=off",  # a drill's copy must not archive into the repository it was restored from
            "restore",
        )  # fmt: skip
        self.timings["restore"] = time.monotonic() - started
        restored_port = free_port()
        started = time.monotonic()
        self.pg_ctl(data, "-w", "-t", "120", "-o", f"-p {restored_port} -k {self.sockets}", "start")
        self.running.append(data)
        deadline = time.monotonic() + 120
        while self.sql(restored_port, "SELECT pg_is_in_recovery()") != "f":
            if time.monotonic() > deadline:
                raise RuntimeError("the restored cluster did not promote within 120 s")
            time.sleep(0.2)
        self.timings["start and replay"] = time.monotonic() - started
        rto = self.timings["restore"] + self.timings["start and replay"]
        say(
            f"restored in {self.timings['restore']:.1f} s, started and promoted in "
            f"{self.timings['start and replay']:.1f} s on 127.0.0.1:{restored_port}: RTO {rto:.1f} s at this size "
            f"({replay_mb:.0f} MB of WAL replayed, {replay_mb / self.timings['start and replay']:.0f} MB/s)"
        )

        self.manage(restored_port, "check")
        seen = self.inspect(restored_port, national_ids)
        assert seen["readyz"] == 200, f"/readyz on the restored copy: {seen}"
        assert seen["checks"]["encryption"] == "ok", seen
        assert seen["found"]["A"] == [["Record-A", national_ids["A"]]], f"A not read back: {seen['found']}"
        assert seen["found"]["B"] == [], f"B is present after recovery to a time before it: {seen['found']}"
        wrong = self.inspect(restored_port, {}, key=base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        assert wrong["readyz"] == 503, f"/readyz with a wrong key: {wrong}"
        say("restored copy: manage.py check passes, /readyz 200, A present and its national ID decrypted, B absent")
        say(f"                with another FIELD_ENCRYPTION_KEY /readyz 503: {wrong['checks']['encryption']}")

    def cleanup(self, keep: bool) -> None:
        for data in reversed(self.running):
            with contextlib.suppress(Exception):
                self.pg_ctl(data, "-m", "immediate", "-w", "stop")
        if keep:
            say(f"kept {self.folder}")
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the temporary folder")
    parser.add_argument("--data-mb", type=int, default=0, help="MB of rows to write before the base backup")
    parser.add_argument("--wal-mb", type=int, default=0, help="MB of WAL to write between backup and A (replay rate)")
    args = parser.parse_args()

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # through the finally below: the clusters stop, the folder goes

    signal.signal(signal.SIGTERM, stop)
    drill = Drill(Path(tempfile.mkdtemp(prefix="clinic-restore-drill-")), data_mb=args.data_mb, wal_mb=args.wal_mb)
    try:
        drill.drill()
    except (AssertionError, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        drill.cleanup(args.keep)
    timings = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in drill.timings.items())
    say(f"PASSED in {time.monotonic() - STARTED:.1f} s ({timings})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

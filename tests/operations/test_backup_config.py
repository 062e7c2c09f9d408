"""The backup configuration shipped for compose (docker/backup/) and the Kubernetes examples
(deploy/kubernetes/backup/) say what docs/backup-and-recovery.md says; bench/restore_drill.py runs the
compose files themselves against a throw-away cluster (CI: .ci/restore_drill)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BACKUP = ROOT / "docker" / "backup"


def postgresql_settings() -> dict[str, str]:
    settings = {}
    for line in (BACKUP / "postgresql.conf").read_text().splitlines():
        match = re.match(r"^(\w+)\s*=\s*(.+?)\s*(#.*)?$", line)
        if match:
            settings[match[1]] = match[2].strip("'")
    return settings


def test_postgresql_archives_every_segment_to_pgbackrest_at_least_once_a_minute():
    settings = postgresql_settings()

    assert settings["wal_level"] == "replica"
    assert settings["archive_mode"] == "on"
    assert settings["archive_command"] == "pgbackrest --stanza=clinic archive-push %p"
    assert settings["archive_timeout"] == "60"  # the RPO of docs/backup-and-recovery.md section 1
    assert (settings["log_min_error_statement"], settings["log_error_verbosity"]) == ("panic", "terse")


def test_pgbackrest_has_the_clinic_stanza_on_the_data_and_socket_the_compose_volumes_share():
    config = configparser.ConfigParser()
    config.read(BACKUP / "pgbackrest.conf")

    assert config["clinic"]["pg1-path"] == "/var/lib/postgresql/data"
    assert config["clinic"]["pg1-socket-path"] == postgresql_settings()["unix_socket_directories"]
    assert config["global"]["repo1-path"] == "/var/lib/pgbackrest"
    assert config["global"]["archive-async"] == "y"
    assert "archive-push-queue-max" in config["global"]  # a full repository never stops PostgreSQL


def test_the_kubernetes_examples_archive_at_least_once_a_minute_and_are_not_rendered_by_the_kustomization():
    documents = {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for path in sorted((ROOT / "deploy" / "kubernetes" / "backup").glob("*.yaml"))
    }
    cluster = next(doc for doc in documents["cloudnativepg.yaml"] if doc["kind"] == "Cluster")
    pgo = documents["crunchy-pgo.yaml"][0]

    assert cluster["spec"]["postgresql"]["parameters"]["archive_timeout"] == "60s"
    assert cluster["spec"]["plugins"][0]["isWALArchiver"] is True
    assert pgo["spec"]["patroni"]["dynamicConfiguration"]["postgresql"]["parameters"]["archive_timeout"] == 60
    assert {repo["name"] for repo in pgo["spec"]["backups"]["pgbackrest"]["repos"]} == {"repo1", "repo2"}
    for kustomization in (ROOT / "deploy" / "kubernetes").rglob("kustomization.yaml"):
        assert "backup" not in kustomization.read_text()

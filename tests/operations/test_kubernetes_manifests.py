"""deploy/kubernetes renders with `kubectl kustomize` and holds what docs/operations.md §1 asks of it: probes on
the probe paths, non-root containers with resources, a drain that fits the grace period, one migrate Job,
PgBouncer in transaction mode, a PDB, an HPA on CPU and NetworkPolicies."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
if KUBECTL is None and os.environ.get("REQUIRE_KUBECTL") != "1":
    pytest.skip("kubectl is not installed (REQUIRE_KUBECTL=1 makes this a failure)", allow_module_level=True)


def render(path: str) -> list[dict[str, Any]]:
    result = subprocess.run(  # noqa: S603 - a fixed command line
        [str(KUBECTL), "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def production() -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in render("deploy/kubernetes/overlays/production")}


def test_the_base_renders_too() -> None:
    assert len(render("deploy/kubernetes/base")) == 22


def test_production_holds_every_role_and_the_objects_around_them(production: dict[Any, Any]) -> None:
    assert sorted(production) == [
        ("ConfigMap", "clinic-config"),
        ("Deployment", "beat"),
        ("Deployment", "dicom-worklist"),
        ("Deployment", "export-worker"),
        ("Deployment", "hl7-listener"),
        ("Deployment", "pgbouncer"),
        ("Deployment", "web"),
        ("Deployment", "worker"),
        ("HorizontalPodAutoscaler", "web"),
        ("Job", "migrate"),
        ("Namespace", "clinic"),
        ("NetworkPolicy", "default-deny-ingress"),
        ("NetworkPolicy", "dicom-worklist-ingress"),
        ("NetworkPolicy", "hl7-listener-ingress"),
        ("NetworkPolicy", "pgbouncer-ingress"),
        ("NetworkPolicy", "web-ingress"),
        ("PersistentVolumeClaim", "fhir-exports"),
        ("PodDisruptionBudget", "pgbouncer"),
        ("PodDisruptionBudget", "web"),
        ("Service", "dicom-worklist"),
        ("Service", "hl7-listener"),
        ("Service", "pgbouncer"),
        ("Service", "web"),
    ]
    assert {doc["metadata"].get("namespace") for kind, doc in production.items() if kind[0] != "Namespace"} == {
        "clinic"
    }


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def test_only_the_migrate_job_migrates_and_each_role_runs_its_entrypoint_role(production: dict[Any, Any]) -> None:
    roles = {
        name: _pod(production[(kind, name)])["containers"][0].get("args")
        for kind, name in [
            ("Deployment", "web"),
            ("Deployment", "worker"),
            ("Deployment", "export-worker"),
            ("Deployment", "beat"),
            ("Deployment", "dicom-worklist"),
            ("Deployment", "hl7-listener"),
            ("Job", "migrate"),
        ]
    }
    assert roles == {
        "web": ["web"],
        "worker": ["worker"],
        "export-worker": ["export-worker"],
        "beat": ["beat"],
        "dicom-worklist": ["dicom-worklist"],
        "hl7-listener": ["hl7-listener"],
        "migrate": ["migrate"],
    }
    assert production[("Deployment", "beat")]["spec"]["replicas"] == 2  # one active, one standby (clinic/beat.py)


def test_web_probes_the_probe_paths_and_its_grace_period_covers_the_drain(production: dict[Any, Any]) -> None:
    pod = _pod(production[("Deployment", "web")])
    web = pod["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = production[("ConfigMap", "clinic-config")]["data"]
    drain, graceful = int(config["GUNICORN_DRAIN_SECONDS"]), int(config["GUNICORN_GRACEFUL_TIMEOUT"])
    assert pod["terminationGracePeriodSeconds"] > drain + graceful
    for role in ("worker", "export-worker", "beat"):  # each worker kind keeps a heartbeat of its own
        probe = _pod(production[("Deployment", role)])["containers"][0]["livenessProbe"]
        assert probe["exec"]["command"] == ["python", "manage.py", "liveness", role]


def test_the_export_worker_and_web_share_the_export_files_volume(production: dict[Any, Any]) -> None:
    """The export-worker writes FHIR_EXPORT_DIR (set in the image), the web pods serve and delete from it."""
    image_dir = next(
        line.split("=", 1)[1]
        for line in (ROOT / "docker/Dockerfile").read_text().splitlines()
        if line.startswith("ENV FHIR_EXPORT_DIR=")
    )
    for role in ("web", "export-worker"):
        pod = _pod(production[("Deployment", role)])
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v
        }
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert claims == {"fhir-exports": "fhir-exports"}, role
        assert (mounts["fhir-exports"]["mountPath"], mounts["fhir-exports"].get("readOnly", False)) == (
            image_dir,
            False,
        )
        assert pod["securityContext"]["fsGroup"] == 10001, role  # the app user may write the volume
    claim = production[("PersistentVolumeClaim", "fhir-exports")]["spec"]
    assert claim["accessModes"] == ["ReadWriteMany"]  # web pods and export workers on different nodes
    assert "fhir-exports" not in str(_pod(production[("Deployment", "worker")])["volumes"])  # not theirs


def test_every_container_is_non_root_without_privilege_escalation_and_has_resources(
    production: dict[Any, Any],
) -> None:
    for (kind, name), doc in production.items():
        if kind not in ("Deployment", "Job"):
            continue
        pod = _pod(doc)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            assert set(container["resources"]) == {"requests", "limits"}, name
            _, _, tag = container["image"].rpartition("/")[2].partition(":")
            assert tag not in ("", "latest"), name  # a pinned tag


def test_the_app_reaches_postgresql_through_pgbouncer_in_transaction_mode(production: dict[Any, Any]) -> None:
    env = {e["name"]: e.get("value") for e in _pod(production[("Deployment", "pgbouncer")])["containers"][0]["env"]}
    assert env["POOL_MODE"] == "transaction"
    assert production[("ConfigMap", "clinic-config")]["data"]["DATABASE_TRANSACTION_POOLING"] == "true"
    hpa = production[("HorizontalPodAutoscaler", "web")]["spec"]
    assert hpa["metrics"][0]["resource"]["name"] == "cpu"
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 12)

"""deploy/kubernetes renders with `kubectl kustomize` and holds what docs/operations.md §1 and §8 ask of it: probes
on the probe paths, non-root containers with resources, a drain that fits the grace period, one migrate Job per
release, PgBouncer in transaction mode tuned for recovery, hash-named settings that roll the pods, a PDB for
every role with more than one replica, spreading across nodes and zones, liveness probes that start no Django,
an HPA on CPU and NetworkPolicies."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
if KUBECTL is None and os.environ.get("REQUIRE_KUBECTL") != "1":
    pytest.skip("kubectl is not installed (REQUIRE_KUBECTL=1 makes this a failure)", allow_module_level=True)


def render(path: str, root: Path = ROOT) -> list[dict[str, Any]]:
    result = subprocess.run(  # noqa: S603 - a fixed command line
        [str(KUBECTL), "kustomize", str(root / path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def production() -> dict[tuple[str, str], dict[str, Any]]:
    return _by_name(render("deploy/kubernetes/overlays/production"))


def _by_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """By (kind, name), the generated ConfigMap under its base name (clinic-config-<hash> -> clinic-config)."""
    return {(doc["kind"], _base_name(doc)): doc for doc in docs}


def _base_name(doc: dict[str, Any]) -> str:
    name = doc["metadata"]["name"]
    return name.rpartition("-")[0] if doc["kind"] == "ConfigMap" and name.startswith("clinic-config-") else name


def test_the_base_renders_too() -> None:
    assert len(render("deploy/kubernetes/base")) == 25


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
        ("Job", "migrate-1-0-0"),
        ("Namespace", "clinic"),
        ("NetworkPolicy", "default-deny-ingress"),
        ("NetworkPolicy", "dicom-worklist-ingress"),
        ("NetworkPolicy", "hl7-listener-ingress"),
        ("NetworkPolicy", "pgbouncer-ingress"),
        ("NetworkPolicy", "web-ingress"),
        ("PersistentVolumeClaim", "fhir-exports"),
        ("PodDisruptionBudget", "beat"),
        ("PodDisruptionBudget", "dicom-worklist"),
        ("PodDisruptionBudget", "pgbouncer"),
        ("PodDisruptionBudget", "web"),
        ("PodDisruptionBudget", "worker"),
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
            ("Job", "migrate-1-0-0"),
        ]
    }
    assert roles == {
        "web": ["web"],
        "worker": ["worker"],
        "export-worker": ["export-worker"],
        "beat": ["beat"],
        "dicom-worklist": ["dicom-worklist"],
        "hl7-listener": ["hl7-listener"],
        "migrate-1-0-0": ["migrate"],
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
        # No Django start (manage.py liveness took 9-12 s against a 10 s timeout): about 0.1 s.
        assert probe["exec"]["command"] == ["python", "clinic/liveness_probe.py", role]


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


# --- Day two (issue 35, docs/operations.md section 8) ---------------------------------------------------------


def _workloads(production: dict[Any, Any]) -> dict[str, dict[str, Any]]:
    return {name: doc for (kind, name), doc in production.items() if kind in ("Deployment", "Job")}


def test_each_release_has_a_migrate_job_of_its_own_named_after_the_image_tag(production: dict[Any, Any]) -> None:
    (job,) = [doc for (kind, _), doc in production.items() if kind == "Job"]
    tag = job["spec"]["template"]["spec"]["containers"][0]["image"].rpartition(":")[2]
    assert job["metadata"]["name"] == "migrate-" + tag.replace(".", "-")  # the release's two lines agree
    assert "ttlSecondsAfterFinished" not in job["spec"]  # a GitOps tool would re-create (re-run) it
    assert job["spec"]["activeDeadlineSeconds"] >= 600 + 600  # the lock's wait and a long migration
    annotations = job["metadata"]["annotations"]
    assert annotations["argocd.argoproj.io/hook"] == "PreSync"
    assert annotations["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    assert (ROOT / "docker" / "entrypoint.sh").read_text().count("manage.py migrate_locked") == 1


def test_every_role_reads_the_hash_named_settings_and_a_change_renames_them(production: dict[Any, Any]) -> None:
    config = production[("ConfigMap", "clinic-config")]
    assert re.fullmatch(r"clinic-config-[a-z0-9]{10}", config["metadata"]["name"])
    assert config["data"]["ALLOWED_HOSTS"] == "api.clinic.example.in"  # the overlay's value merged in
    assert config["data"]["LOG_FORMAT"] == config["data"]["ACCESS_LOG_FORMAT"] == "json"
    for name, doc in _workloads(production).items():
        if name == "pgbouncer":
            continue
        refs = [e["configMapRef"]["name"] for e in _pod(doc)["containers"][0]["envFrom"]]
        assert refs == [config["metadata"]["name"]], name
    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(ROOT / "deploy", Path(folder) / "deploy")
        with (Path(folder) / "deploy/kubernetes/overlays/production/config.env").open("a") as env:
            env.write("GUNICORN_THREADS=3\n")
        changed = _by_name(render("deploy/kubernetes/overlays/production", root=Path(folder)))
    new_name = changed[("ConfigMap", "clinic-config")]["metadata"]["name"]
    assert new_name != config["metadata"]["name"]
    web = _pod(changed[("Deployment", "web")])["containers"][0]
    assert web["envFrom"] == [{"configMapRef": {"name": new_name}}]  # a new pod template: the pods roll


def test_every_role_with_more_than_one_replica_has_a_disruption_budget_and_single_ones_none(
    production: dict[Any, Any],
) -> None:
    budgets = {name: doc["spec"] for (kind, name), doc in production.items() if kind == "PodDisruptionBudget"}
    hpa = production[("HorizontalPodAutoscaler", "web")]["spec"]
    for (kind, name), doc in production.items():
        if kind != "Deployment":
            continue
        replicas = hpa["minReplicas"] if name == "web" else doc["spec"]["replicas"]
        if replicas > 1:
            assert budgets[name]["selector"]["matchLabels"] == doc["spec"]["selector"]["matchLabels"], name
            allowed = budgets[name].get("maxUnavailable", replicas - budgets[name].get("minAvailable", 0))
            assert 1 <= allowed < replicas, name  # a drain proceeds, one at a time, never all at once
        else:
            # A budget on one replica would block every node drain.
            assert name not in budgets, name


def test_every_deployment_spreads_across_nodes_and_softly_across_zones(production: dict[Any, Any]) -> None:
    for (kind, name), doc in production.items():
        if kind != "Deployment":
            continue
        labels = doc["spec"]["template"]["metadata"]["labels"]
        spread = {c["topologyKey"]: c for c in _pod(doc)["topologySpreadConstraints"]}
        assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule", name
        assert spread["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway", name
        for constraint in spread.values():
            assert constraint["maxSkew"] == 1
            selector = constraint["labelSelector"]["matchLabels"]
            assert selector.items() <= labels.items(), name
            assert selector == doc["spec"]["selector"]["matchLabels"] | {
                "app.kubernetes.io/component": labels["app.kubernetes.io/component"]
            }, name


def test_no_probe_starts_django_and_web_readiness_outlasts_a_short_database_restart(
    production: dict[Any, Any],
) -> None:
    for name, doc in _workloads(production).items():
        for container in _pod(doc)["containers"]:
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = container.get(kind)
                if probe and "exec" in probe:
                    assert "manage.py" not in probe["exec"]["command"], (name, kind)
                    assert probe["exec"]["command"][:2] == ["python", "clinic/liveness_probe.py"], (name, kind)
    readiness = _pod(production[("Deployment", "web")])["containers"][0]["readinessProbe"]
    # Out of rotation only after 10 s or more of failures: a one-second restart keeps every pod in.
    assert (readiness["failureThreshold"] - 1) * readiness["periodSeconds"] >= 10


def test_pgbouncer_is_tuned_for_recovery(production: dict[Any, Any]) -> None:
    env = {e["name"]: e.get("value") for e in _pod(production[("Deployment", "pgbouncer")])["containers"][0]["env"]}
    assert int(env["SERVER_LOGIN_RETRY"]) <= 2  # default 15 s: a 0.5 s restart was 17 s of errors
    assert int(env["SERVER_CONNECT_TIMEOUT"]) <= 5
    assert int(env["QUERY_WAIT_TIMEOUT"]) < 30  # under gunicorn's --timeout 30 (docker/entrypoint.sh)
    assert "--timeout 30" in (ROOT / "docker" / "entrypoint.sh").read_text()
    assert int(env["SERVER_CHECK_DELAY"]) <= 30
    assert env["SERVER_RESET_QUERY_ALWAYS"] == "0"
    # The migrate lock's keep-alive (every 5 s) keeps its transaction under PgBouncer's idle limit.
    from clinic.management.commands.migrate_locked import KEEPALIVE_SECONDS

    assert int(env["IDLE_TRANSACTION_TIMEOUT"]) > 4 * KEEPALIVE_SECONDS


def test_compose_runs_pgbouncer_with_the_manifests_recovery_settings(production: dict[Any, Any]) -> None:
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    manifest = {
        e["name"]: e.get("value") for e in _pod(production[("Deployment", "pgbouncer")])["containers"][0]["env"]
    }
    local = compose["pgbouncer"]["environment"]
    for name, value in manifest.items():
        if name.startswith(("SERVER_", "QUERY_", "IDLE_")) or name in ("POOL_MODE", "MAX_PREPARED_STATEMENTS"):
            assert local[name] == value, name
    # The roles through it, in transaction mode; migrate straight to PostgreSQL (DDL on one session).
    assert compose["web"]["environment"]["DATABASE_URL"].endswith("@pgbouncer:6432/clinic")
    assert compose["web"]["environment"]["DATABASE_TRANSACTION_POOLING"] == "true"
    assert compose["migrate"]["environment"]["DATABASE_URL"].endswith("@postgres:5432/clinic")
    for role in ("worker", "export-worker", "beat"):
        assert compose[role]["healthcheck"]["test"] == ["CMD", "python", "clinic/liveness_probe.py", role]

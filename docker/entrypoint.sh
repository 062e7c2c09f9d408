#!/bin/sh
# Roles (docs/operations.md §1):
#   migrate  apply migrations, once per release (a Kubernetes Job, a compose one-off) before the new web pods;
#            migrations are written to be safe while the previous release still serves. Two at once: the
#            second waits for the first's advisory lock, then finds nothing to apply.
#   web      gunicorn, never migrating: two pods migrating one database at once crashed one (issue 20). Its
#            /readyz stays 503 until the migrate role has run. SIGTERM drains (clinic/gunicorn_config.py).
#   worker   Celery worker of the default queue `celery`: deliveries, notifications, HL7 sends, housekeeping.
#   export-worker  Celery worker of the `fhir-export` queue alone (FHIR Bulk Data exports, which run for
#            minutes): it writes FHIR_EXPORT_DIR, which the web role reads, so both mount the same volume.
#   beat     Celery beat: run one or two; only the lock holder sends (clinic/beat.py).
#   dicom-worklist  the DICOM Modality Worklist and MPPS server (manage.py dicom_worklist) on DICOM_PORT
#            (11112) as DICOM_AE_TITLE (CLINIC_MWL); SIGTERM stops accepting and lets associations finish.
#   anything else is run as a command.
# Liveness of worker, export-worker and beat: `python clinic/liveness_probe.py worker|export-worker|beat` (exit
# 0 = this container's role recorded a heartbeat in Redis within 3 intervals; about 0.1 s, no Django start),
# which docker/compose.yaml and the manifests run; `python manage.py liveness ROLE [--any|--node]` asks Redis.
# .ci/production_roles starts each role through this file.
set -e
case "$1" in
  migrate)
    # Under a PostgreSQL advisory lock: a second run at the same time waits, then applies nothing; both
    # exit 0 (clinic/management/commands/migrate_locked.py). Direct or through PgBouncer.
    exec python manage.py migrate_locked --lock-timeout "${MIGRATE_LOCK_TIMEOUT:-600}"
    ;;
  web)
    # Metrics of every gunicorn worker, added up by /metrics (clinic/metrics.py).
    export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-/tmp/clinic-metrics}"
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    # clinic/gunicorn_config.py: an access log without query strings (tokens, patient search terms), the
    # drain on SIGTERM (GUNICORN_DRAIN_SECONDS, GUNICORN_GRACEFUL_TIMEOUT).
    exec gunicorn clinic.wsgi:application \
      --config python:clinic.gunicorn_config \
      --bind "${GUNICORN_BIND:-0.0.0.0:8000}" \
      --workers "${GUNICORN_WORKERS:-4}" \
      --threads "${GUNICORN_THREADS:-2}" \
      --timeout 30 \
      --access-logfile - \
      --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-127.0.0.1}"
    ;;
  worker)
    # --quiet: no start banner (text) in a log stream of JSON lines; Celery's own log lines go through the
    # service's logging (JSON with DEBUG off), and its shutdown lines too (clinic/celery.py).
    exec celery -A clinic --quiet worker --queues celery --loglevel "${LOG_LEVEL:-INFO}" --concurrency "${CELERY_CONCURRENCY:-4}"
    ;;
  export-worker)
    exec celery -A clinic --quiet worker --queues fhir-export --loglevel "${LOG_LEVEL:-INFO}" \
      --concurrency "${CELERY_EXPORT_CONCURRENCY:-2}"
    ;;
  hl7-listener)
    # HL7 v2 ORU^R01 results over MLLP (integrations/hl7/listener.py); SIGTERM finishes the messages in hand.
    exec python manage.py hl7_listener --port "${HL7_LISTENER_PORT:-2575}"
    ;;
  beat)
    # Schedule state and the singleton lock live in Redis (clinic/beat.py): no schedule file.
    exec celery -A clinic --quiet beat --loglevel "${LOG_LEVEL:-INFO}"
    ;;
  dicom-worklist)
    exec python manage.py dicom_worklist --port "${DICOM_PORT:-11112}" --ae-title "${DICOM_AE_TITLE:-CLINIC_MWL}"
    ;;
  *)
    exec "$@"
    ;;
esac

#!/bin/sh
# Roles: web (migrates, then gunicorn), worker (Celery worker), beat (Celery beat), or any command.
# Liveness of worker and beat: `python manage.py liveness worker` / `liveness beat` (exit 0 = alive), which
# docker/compose.yaml runs as their healthchecks. .ci/production_roles starts each role through this file.
set -e
case "$1" in
  web)
    python manage.py migrate --no-input
    # clinic/gunicorn_config.py: an access log without query strings (tokens, patient search terms).
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
    exec celery -A clinic worker --loglevel "${LOG_LEVEL:-INFO}" --concurrency "${CELERY_CONCURRENCY:-4}"
    ;;
  beat)
    exec celery -A clinic beat --loglevel "${LOG_LEVEL:-INFO}" --schedule "${BEAT_SCHEDULE_FILE:-/tmp/celerybeat-schedule}"
    ;;
  *)
    exec "$@"
    ;;
esac

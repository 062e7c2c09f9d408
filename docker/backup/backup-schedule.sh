#!/bin/sh
# The `backup` service of the compose deployment (docs/backup-and-recovery.md section 2): creates the
# pgBackRest stanza once (idempotent), checks that archiving works, then takes a full backup every Sunday
# and a differential one every other day at BACKUP_AT (default 01:00, the container's TZ), and a full one
# at once when the repository holds none (each backup expires the ones past the retention). Runs as postgres, beside the database (same data volume, same
# socket); a failed backup is logged and retried the next day, never stops the loop.
set -eu
AT=${BACKUP_AT:-01:00}
log() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) backup-schedule: $*"; }

until pgbackrest --stanza=clinic stanza-create; do log "stanza-create failed; retrying in 30 s"; sleep 30; done
pgbackrest --stanza=clinic check || log "check failed: is archive_command set (docker/backup/postgresql.conf)?"
if ! pgbackrest --stanza=clinic info | grep -q "full backup"; then
  log "no full backup yet: taking one"
  pgbackrest --stanza=clinic --type=full backup || log "full backup failed"
fi
while true; do
  next=$(date -d "today $AT" +%s)
  [ "$next" -gt "$(date +%s)" ] || next=$(date -d "tomorrow $AT" +%s)
  sleep $((next - $(date +%s)))
  type=diff
  [ "$(date +%u)" = 7 ] && type=full
  log "taking a $type backup"
  pgbackrest --stanza=clinic --type=$type backup || log "$type backup failed"
done

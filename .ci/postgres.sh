#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the tests marked `postgres`, then print one line
# for the caller to eval:
#
#     eval "$(.ci/postgres.sh)"    # -> export WMKIT_POSTGRES_URL=postgresql+psycopg://...
#
# Idempotent: it installs the Debian `postgresql` package only when no server binaries are
# present, initialises the data directory only once, reuses a server that already answers
# on the port, and creates the database only when it is missing. Everything but the export
# line goes to stderr. The cluster trusts every connection from 127.0.0.1: it is for tests
# on a throwaway machine only. Settings (environment): WMKIT_PG_PORT (5432), WMKIT_PG_DB
# (wmkit_test), WMKIT_PG_DATA (/var/tmp/wmkit-postgres).
set -euo pipefail

PORT="${WMKIT_PG_PORT:-5432}"
DB="${WMKIT_PG_DB:-wmkit_test}"
DATA="${WMKIT_PG_DATA:-/var/tmp/wmkit-postgres}"
HOST=127.0.0.1
log() { echo "postgres.sh: $*" >&2; }

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
BIN="$(find_bin)"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  log "installing the postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  BIN="$(find_bin)"
fi
[ -x "$BIN/pg_ctl" ] || { log "no PostgreSQL binaries under /usr/lib/postgresql"; exit 1; }

# initdb and the server refuse to run as root: run them as the postgres user when root.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if "$BIN/pg_isready" -q -h "$HOST" -p "$PORT"; then
  log "a server already answers on $HOST:$PORT: reusing it"
else
  if [ ! -s "$DATA/PG_VERSION" ]; then
    log "initialising $DATA"
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$DATA"
    chmod 700 "$DATA"
    as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >&2
  fi
  log "starting the server on $HOST:$PORT"
  # The socket goes in the data directory: /var/run/postgresql may not exist here.
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start \
    -o "-c listen_addresses=$HOST -p $PORT -k $DATA" >&2
fi

psql_() { "$BIN/psql" -X -q -h "$HOST" -p "$PORT" -U postgres "$@"; }
if ! psql_ -d postgres -tAc "SELECT 1" >/dev/null 2>&1; then
  log "the server on $HOST:$PORT refuses user postgres without a password;" \
    "set WMKIT_PG_PORT to a free port"
  exit 1
fi
if [ "$(psql_ -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]; then
  log "creating database $DB"
  psql_ -d postgres -c "CREATE DATABASE \"$DB\"" >&2
fi
echo "export WMKIT_POSTGRES_URL=postgresql+psycopg://postgres@$HOST:$PORT/$DB"

#!/bin/sh
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  postgres -D "$PGDATA" -c listen_addresses='' -k /tmp &
  pid=$!
  until pg_isready -q -h /tmp -U "$user" -d postgres; do sleep 0.2; done
  [ "$db" = postgres ] || createdb -h /tmp -U "$user" "$db"
  kill "$pid"; wait "$pid" || true
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp

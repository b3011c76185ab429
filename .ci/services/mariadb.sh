#!/usr/bin/env bash
# Start a local MariaDB server for the tests marked `mysql` (idempotent).
#
# Installs Debian's mariadb-server when mysqld is missing, starts mysqld_safe in the
# background unless a server already answers, waits until it does, and prints the URL
# to use (root over the unix socket): export it as AGENTENVS_MYSQL_URL.
# Stop it with `mysqladmin shutdown`.
set -euo pipefail

# A daemon must not hold the caller's pipes (fds above 2 inherited from whoever runs this
# script), or a caller that reads our output to EOF would wait for the daemon to exit.
close_inherited_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}


SOCKET=${MARIADB_SOCKET:-/run/mysqld/mysqld.sock}
WAIT_S=${MARIADB_WAIT_S:-60}

have_mysqld() {
  command -v mysqld >/dev/null 2>&1 || command -v mariadbd >/dev/null 2>&1 \
    || [ -x /usr/sbin/mysqld ] || [ -x /usr/sbin/mariadbd ]
}

ping_server() {
  mysqladmin --socket="$SOCKET" -uroot ping >/dev/null 2>&1
}

if ! have_mysqld; then
  echo "mariadb.sh: installing mariadb-server" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq mariadb-server >/dev/null
fi

mkdir -p "$(dirname "$SOCKET")"
chown mysql:mysql "$(dirname "$SOCKET")"

if ! ping_server; then
  # a data dir is normally made by the package; make one when it is missing
  if [ ! -d /var/lib/mysql/mysql ]; then
    mysql_install_db --user=mysql --datadir=/var/lib/mysql >/dev/null
  fi
  echo "mariadb.sh: starting mysqld_safe" >&2
  (close_inherited_fds; cd / && exec setsid nohup mysqld_safe --socket="$SOCKET" </dev/null >/tmp/mariadb-mysqld_safe.log 2>&1 &)
  for _ in $(seq 1 "$WAIT_S"); do
    ping_server && break
    sleep 1
  done
  if ! ping_server; then
    echo "mariadb.sh: server did not answer within ${WAIT_S}s; see /tmp/mariadb-mysqld_safe.log" >&2
    exit 1
  fi
fi

echo "mysql://root@localhost/?unix_socket=${SOCKET}"

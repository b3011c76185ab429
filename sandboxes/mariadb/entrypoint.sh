#!/bin/sh
# Initialize the data dir when empty, then run the server in the foreground as mysql,
# socket only (the container has no network). Extra arguments go to mysqld.
set -eu
DATADIR=/var/lib/mysql
mkdir -p "$DATADIR" /run/mysqld
chown mysql:mysql "$DATADIR"
# the socket dir may be a host bind mount made writable for all: leave its owner alone
# (a host user could not remove a dir of another uid from a sticky /tmp); a plain dir
# in the image is given to mysql
[ "$(stat -c %a /run/mysqld)" = 777 ] || chown mysql:mysql /run/mysqld
if [ ! -d "$DATADIR/mysql" ]; then
  # root@localhost authenticates via unix_socket (the connecting process's uid)
  mariadb-install-db --user=mysql --datadir="$DATADIR" --auth-root-authentication-method=socket \
    --skip-test-db >/dev/null
fi
exec mariadbd --user=mysql --datadir="$DATADIR" --skip-networking \
  --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid "$@"

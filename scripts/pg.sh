#!/bin/sh
# pg.sh starts a throwaway PostgreSQL server for the store tests, and stops it.
#
#   eval "$(scripts/pg.sh)"            # start; exports TASKBRIDGE_TEST_PG and TASKBRIDGE_TEST_PG_DIR
#   go test -race ./store/...
#   scripts/pg.sh stop "$TASKBRIDGE_TEST_PG_DIR"
#
# The server lives in a new temporary directory: data, socket and log. It listens on
# 127.0.0.1 only, on a free port, trusts local connections (no password) and runs with
# fsync off: it is for tests, never for data. Run as root (CI), it runs the server as the
# postgres user, since PostgreSQL refuses to run as root; run as anyone else, it runs it
# as that user.
#
# Binaries: $PG_BIN if set, else /usr/lib/postgresql/15/bin, else the newest
# /usr/lib/postgresql/*/bin, else the directory of initdb or pg_config on PATH.
# Debian/Ubuntu: apt-get install -y postgresql-15 (the service need not run).
set -eu

die() { echo "pg.sh: $*" >&2; exit 1; }

find_bin() {
	if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
	if [ -x /usr/lib/postgresql/15/bin/initdb ]; then echo /usr/lib/postgresql/15/bin; return; fi
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
	if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
	if command -v pg_config >/dev/null 2>&1; then pg_config --bindir; return; fi
	die "PostgreSQL server binaries not found (install postgresql-15 or set PG_BIN)"
}

# as_owner runs a command as the user that owns the server: postgres when we are root.
as_owner() {
	if [ "$(id -u)" -ne 0 ]; then "$@"; return; fi
	if command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		# su needs one command string; every argument here is quoted safely by us.
		cmd=""
		for a in "$@"; do cmd="$cmd '$(printf %s "$a" | sed "s/'/'\\\\''/g")'"; done
		su postgres -s /bin/sh -c "$cmd"
	fi
}

start() {
	bin=$(find_bin)
	[ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] || die "no initdb/pg_ctl in $bin"
	dir=$(mktemp -d "${TMPDIR:-/tmp}/taskbridge-pg.XXXXXX")
	touch "$dir/.taskbridge-pg" # marks the directory as ours for stop
	if [ "$(id -u)" -eq 0 ]; then
		id postgres >/dev/null 2>&1 || die "running as root but there is no postgres user"
		chown postgres "$dir"
		chmod 700 "$dir"
	fi
	as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; die "initdb failed (left in $dir)"; }

	# Pick a port and let the server tell us whether it is free: no race with a probe.
	tries=0
	while :; do
		port=$(( 20000 + ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000) ))
		if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
			-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
			start >/dev/null 2>&1; then
			break
		fi
		tries=$((tries + 1))
		if [ $tries -ge 5 ] || ! grep -q "already in use" "$dir/server.log" 2>/dev/null; then
			cat "$dir/server.log" >&2 2>/dev/null || true
			die "server did not start (left in $dir)"
		fi
	done
	as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres taskbridge ||
		die "createdb failed (server left running in $dir; stop it with: $0 stop $dir)"

	echo "export TASKBRIDGE_TEST_PG='postgres://postgres@127.0.0.1:$port/taskbridge?sslmode=disable'"
	echo "export TASKBRIDGE_TEST_PG_DIR='$dir'"
	echo "pg.sh: PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir; stop with: $0 stop $dir" >&2
}

stop() {
	dir=${1:-}
	[ -n "$dir" ] || die "usage: $0 stop DIR"
	[ -f "$dir/.taskbridge-pg" ] || die "$dir was not made by pg.sh; not touching it"
	bin=$(find_bin)
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || echo "pg.sh: pg_ctl stop failed" >&2
	fi
	rm -rf "$dir"
}

case "${1:-start}" in
start) start ;;
stop) shift; stop "$@" ;;
*) die "usage: $0 [start] | $0 stop DIR" ;;
esac

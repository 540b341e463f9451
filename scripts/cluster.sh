# cluster.sh - a throwaway PostgreSQL 15 cluster for the demo and benchmarks.
# Source it, then:  cluster_start [extra postgresql.conf lines...]
#                   psql_app -c 'select 1'      (superuser on the socket)
#                   cluster_halt; cluster_launch [-c name=value...]   (a restart)
#                   cluster_stop                 (also run from an EXIT trap)
#                   server_ticks                 (the cluster's CPU time, for benchmarks)
#                   save_cluster A; use_cluster A (several clusters)
#                   pin_backends COUNT           (pinned clients' backends onto their CPUs)
#                   wait_no_clients              (before server_ticks)
# Sets CLUSTER_DIR, CLUSTER_PORT, CLUSTER_PID, CLUSTER_URL (TCP, password auth).
# As root, initdb and postgres run as the `postgres` OS user.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 - 2>/dev/null <<'PY' || echo $((20000 + $$ % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])
PY
}

cluster_start() {
	CLUSTER_DIR=$(mktemp -d /tmp/traceprof-cluster.XXXXXX)
	chmod 755 "$CLUSTER_DIR"
	[ "$(id -u)" = 0 ] && chown postgres: "$CLUSTER_DIR"
	CLUSTER_PORT=$(free_port)
	echo secret > "$CLUSTER_DIR/pwfile"
	as_postgres "$PG_BIN/initdb" -D "$CLUSTER_DIR/data" -U postgres -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=scram-sha-256 --pwfile="$CLUSTER_DIR/pwfile" >"$CLUSTER_DIR/initdb.log" 2>&1 ||
		{ cat "$CLUSTER_DIR/initdb.log" >&2; return 1; }
	{
		echo "port = $CLUSTER_PORT"
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = '$CLUSTER_DIR'"
		for line in "$@"; do echo "$line"; done
	} >>"$CLUSTER_DIR/data/postgresql.conf"
	cluster_launch || return 1
	psql_app -q -c "CREATE ROLE app LOGIN PASSWORD 'secret'" -c "CREATE DATABASE app OWNER app"
	CLUSTER_URL="postgres://app:secret@127.0.0.1:$CLUSTER_PORT/app?sslmode=disable"
}

# Start the cluster's postmaster (server options allowed: -c name=value)
# and wait until it accepts connections.
cluster_launch() {
	as_postgres "$PG_BIN/postgres" -D "$CLUSTER_DIR/data" "$@" >>"$CLUSTER_DIR/server.log" 2>&1 &
	launcher=$!
	for _ in $(seq 1 100); do
		as_postgres "$PG_BIN/pg_isready" -q -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" && break
		kill -0 "$launcher" 2>/dev/null || { cat "$CLUSTER_DIR/server.log" >&2; return 1; }
		sleep 0.1
	done
	# The postmaster's own PID (the first line of postmaster.pid).
	CLUSTER_PID=$(head -n 1 "$CLUSTER_DIR/data/postmaster.pid")
}

psql_app() {
	as_postgres psql -X -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -d "${PSQL_DB:-postgres}" -v ON_ERROR_STOP=1 "$@"
}

# CPU time (clock ticks, utime + stime) of process $1.  The process name
# may hold blanks: fields are counted after ')'.
pid_ticks() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'
}

# CPU time (clock ticks) of the postmaster, its reaped children, and its
# live children.
server_ticks() {
	{
		sed 's/.*) //' "/proc/$CLUSTER_PID/stat" | awk '{ print $12 + $13 + $14 + $15 }'
		for child in $(pgrep -P "$CLUSTER_PID"); do
			pid_ticks "$child"
		done
	} | awk '{ t += $1 } END { print t + 0 }'
}

# Several clusters: the current one (CLUSTER_*) saved as NAME_* and
# made current again (benchmarks that drive two at once).
save_cluster() {
	eval "${1}_DIR=\$CLUSTER_DIR ${1}_PORT=\$CLUSTER_PORT ${1}_PID=\$CLUSTER_PID"
}
use_cluster() {
	eval "CLUSTER_DIR=\${${1}_DIR:-} CLUSTER_PORT=\${${1}_PORT:-} CLUSTER_PID=\${${1}_PID:-}"
}

# pin_backends COUNT: the current cluster's COUNT backends of clients named
# bench_cpuN (application_name), each pinned to CPU N as its client is,
# moved onto CPU N too: backends inherit the postmaster's CPUs.  Waits up
# to 2 s for them to connect; false, saying why, when they did not.
pin_backends() {
	# A backend of the last run may still be listed while it exits: list
	# again until exactly $1 are there and each could be pinned.
	for _ in $(seq 1 40); do
		pins=$(PGOPTIONS="-c traceprof.sample_rate=0" psql_app -At -F' ' -c \
			"SELECT pid, substr(application_name, 10) FROM pg_stat_activity WHERE application_name LIKE 'bench_cpu%'")
		if [ "$(echo "$pins" | grep -c .)" = "$1" ] &&
			echo "$pins" | { ok=0; while read -r pid cpu; do
				taskset -p -c "$cpu" "$pid" >/dev/null 2>&1 || ok=1; done; exit $ok; }; then
			return 0
		fi
		sleep 0.05
	done
	echo "cluster on port $CLUSTER_PORT: could not pin $1 backends, found: $pins" >&2
	return 1
}

# wait_no_clients: until the current cluster has no client backend but
# this one (at most 5 s): their CPU time is then in the postmaster's
# cutime (server_ticks).
wait_no_clients() {
	for _ in $(seq 1 100); do
		[ "$(PGOPTIONS="-c traceprof.sample_rate=0" psql_app -At -c "SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && return 0
		sleep 0.05
	done
}

# Fast shutdown by PID, keeping the data directory (cluster_launch starts it again).
cluster_halt() {
	if [ -n "${CLUSTER_PID:-}" ] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
		kill -INT "$CLUSTER_PID"
		while kill -0 "$CLUSTER_PID" 2>/dev/null; do sleep 0.1; done
	fi
}

# Fast shutdown by PID; waits so the next run can reuse nothing stale.
cluster_stop() {
	cluster_halt
	[ -n "${CLUSTER_DIR:-}" ] && rm -rf "$CLUSTER_DIR"
	CLUSTER_PID= CLUSTER_DIR=
}

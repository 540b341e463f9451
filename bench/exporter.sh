#!/bin/sh
# bench/exporter.sh - how many spans per second the extension's exporter
# worker sustains to a local OTLP/HTTP receiver (bench/sink.py), and its
# CPU per span.  Prints a table; asserts nothing.
#
#   SPANS=200000 bench/exporter.sh
#
# Spans pile up first while the endpoint is a closed port (the ring keeps
# what could not be sent), then the endpoint is switched to the sink and the
# drain is timed: only the exporter runs, so the figure is its throughput,
# not the rate at which pgbench happens to create spans.
set -eu

cd "$(dirname "$0")/.."
. scripts/cluster.sh
. bench/summary.sh
spans=${SPANS:-200000}

dir=$(mktemp -d "${TMPDIR:-/tmp}/traceprof-bench-exporter.XXXXXX")
sinkpid=""
cleanup() {
	cluster_stop
	[ -n "$sinkpid" ] && kill "$sinkpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 bench/sink.py "$dir/port" &
sinkpid=$!
while [ ! -s "$dir/port" ]; do sleep 0.1; done
sink="http://127.0.0.1:$(cat "$dir/port")"

echo "bench/exporter.sh: starting a PostgreSQL 15 cluster" >&2
cluster_start "shared_preload_libraries = 'traceprof'" \
	"traceprof.max_spans = $((spans + spans / 4))" "traceprof.sample_rate = 1" \
	"traceprof.profile = off" "traceprof.otlp_endpoint = 'http://127.0.0.1:$(free_port)'" \
	"traceprof.export_interval = 100" "traceprof.otlp_timeout = 200" >/dev/null
psql_app -q -c "CREATE EXTENSION traceprof"
"$PG_BIN/pgbench" -i -s 1 -q "$CLUSTER_URL" >/dev/null 2>&1

pending() { psql_app -At -c "SELECT spans_pending FROM traceprof.stats"; }

echo "bench/exporter.sh: creating $spans spans while the endpoint is down" >&2
while [ "$(pending)" -lt "$spans" ]; do
	"$PG_BIN/pgbench" -S -c 2 -j 2 -T 2 "$CLUSTER_URL" >/dev/null 2>&1
done
queued=$(pending)
exporter=$(pgrep -P "$CLUSTER_PID" -f "traceprof exporter")

# Neither the switch nor the polling below may add spans of their own.
export PGOPTIONS="-c traceprof.sample_rate=0"
dropped0=$(psql_app -At -c "SELECT spans_dropped FROM traceprof.stats")
t0=$(date +%s.%N) c0=$(pid_ticks "$exporter")
psql_app -q -c "ALTER SYSTEM SET traceprof.otlp_endpoint = '$sink'" -c "SELECT pg_reload_conf()" >/dev/null
while [ "$(pending)" -gt 0 ]; do sleep 0.05; done
t1=$(date +%s.%N) c1=$(pid_ticks "$exporter")
read -r requests bytes <<EOT
$(curl -s "$sink/stats")
EOT
dropped=$(( $(psql_app -At -c "SELECT spans_dropped FROM traceprof.stats") - dropped0 ))

awk -v n="$queued" -v t0="$t0" -v t1="$t1" -v ticks="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" \
	-v req="$requests" -v bytes="$bytes" -v dropped="$dropped" 'BEGIN {
	secs = t1 - t0
	printf "\nexporter drain: %d spans queued, sent to a local OTLP/HTTP sink\n\n", n
	printf "%-10s %12s %12s %14s %12s %10s %13s\n", "seconds", "spans/s", "requests", "bytes/span", "CPU s", "us/span", "dropped"
	printf "%-10.2f %12.0f %12d %14.0f %12.2f %10.2f %13d\n", secs, n / secs, req, bytes / n, ticks / hz, ticks / hz * 1e6 / n, dropped
}'
summary_row exporter "spans/s sustained to a local OTLP receiver" \
	"$(awk -v n="$queued" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.0f", n / (t1 - t0) }')"
summary_row exporter "exporter CPU per span (us)" \
	"$(awk -v n="$queued" -v t="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')"

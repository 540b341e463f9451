#!/bin/bash
# demo.sh - the main job: generator + loader traced end to end into a
# throwaway PostgreSQL 15 with the traceprof extension, then the story.
#
# An OTLP capture sink (scripts/demo/otlp-sink.js) stands in for a
# collector; generator, loader and the server's exporter all send to it.
# With OTEL_EXPORTER_OTLP_ENDPOINT set (an http base URL), the sink also
# forwards every span there; with PYROSCOPE_SERVER_ADDRESS set, the binaries
# and the server upload their profiles there too.
# Artifacts land in demo-out/.  Run through `make demo`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="${DEMO_OUT:-$root/demo-out}"
bin="$root/build/bin"
records=${DEMO_RECORDS:-50000}
sink_pid=

. "$root/scripts/cluster.sh"

cleanup() {
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null && wait "$sink_pid" 2>/dev/null
	cluster_stop
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

rm -rf "$out"
mkdir -p "$out"

step "OTLP capture sink"
user_otlp=${OTEL_EXPORTER_OTLP_ENDPOINT:-}
user_pyroscope=${PYROSCOPE_SERVER_ADDRESS:-}
FORWARD_TO="$user_otlp" node "$root/scripts/demo/otlp-sink.js" "$out/spans.jsonl" "$out/sink.port" &
sink_pid=$!
for _ in $(seq 1 50); do [ -s "$out/sink.port" ] && break; sleep 0.1; done
[ -s "$out/sink.port" ] || { echo "demo: the OTLP sink did not start" >&2; exit 1; }
endpoint="http://127.0.0.1:$(cat "$out/sink.port")"
echo "listening at $endpoint${user_otlp:+, forwarding to $user_otlp}"

step "PostgreSQL 15 with traceprof"
# The highest sampling rate the kernel delivers (see docs): a demo-sized
# COPY takes a fraction of a second of CPU.  The demo traces a handful of
# statements: spans in full detail (plan spans, CPU time; off by default).
cluster_start "shared_preload_libraries = 'traceprof'" \
	"traceprof.otlp_endpoint = '$endpoint'" \
	"traceprof.export_interval = 200" \
	"traceprof.service_name = 'postgresql'" \
	"traceprof.pyroscope_url = '$user_pyroscope'" \
	"traceprof.upload_interval = 500" \
	"traceprof.sample_hz = 250" \
	"traceprof.track_planning = on" \
	"traceprof.track_cpu_time = on"
PSQL_DB=app psql_app -q -c "CREATE EXTENSION traceprof"
echo "cluster on port $CLUSTER_PORT (data in $CLUSTER_DIR), extension created, sampling at 250 Hz of CPU time"

export OTEL_EXPORTER_OTLP_ENDPOINT="$endpoint"
if [ -n "$user_pyroscope" ]; then
	export PYROSCOPE_ENABLE=true PYROSCOPE_TRACE_CORRELATION=true
	echo "profiles also go to $user_pyroscope"
fi

step "generator $records orders.json"
"$bin/generator" "$records" "$out/orders.json" --profile-out "$out/generator.speedscope.json" 2>&1 |
	tee "$out/generator.log"

step "loader $CLUSTER_URL orders.json" | sed 's/:secret@/:***@/'
"$bin/loader" "$CLUSTER_URL" "$out/orders.json" --profile-out "$out/loader.svg" 2>&1 |
	tee "$out/loader.log"
trace=$(sed -n 's/.*trace_id=\([0-9a-f]\{32\}\).*/\1/p' "$out/loader.log" | head -n 1)
[ -n "$trace" ] || { echo "demo: the loader printed no trace id" >&2; exit 1; }

# Wait until the server's exporter has sent everything it holds (spans,
# and samples when they go to a Pyroscope too).
for _ in $(seq 1 100); do
	pending=$(PSQL_DB=app psql_app -Atc "SELECT spans_pending + CASE WHEN '$user_pyroscope' = '' THEN 0
		ELSE samples_stored - samples_exported - samples_dropped END FROM traceprof.stats")
	[ "$pending" = 0 ] && grep -q "\"service\":\"postgresql\"" "$out/spans.jsonl" 2>/dev/null && break
	sleep 0.1
done
sleep 0.3	# the sink polls its requests every 100 ms

step "what the database holds"
PSQL_DB=app psql_app -c "SELECT count(*) AS rows, sum(amount) AS total_amount, min(created_at) AS first, max(created_at) AS last FROM orders"

step "trace $trace: client spans and the server spans under them"
node "$root/scripts/demo/span-tree.js" "$out/spans.jsonl" "$trace" | tee "$out/trace.txt"

step "the same server spans, read from SQL (traceprof.trace_spans)"
PSQL_DB=app psql_app -c "SELECT name, kind, round(duration_ms::numeric, 2) AS ms, round(cpu_time_ms::numeric, 2) AS cpu_ms,
       attributes->>'db.response.returned_rows' AS rows, attributes->>'traceprof.rows_affected' AS rows_written,
       attributes->>'traceprof.wal_bytes' AS wal_bytes
  FROM traceprof.trace_spans('$trace') ORDER BY start_time"
PSQL_DB=app psql_app -c "SELECT spans_created, spans_exported, spans_dropped, export_failures, samples_stored, samples_exported, upload_failures FROM traceprof.stats"

step "where PostgreSQL spent the CPU of trace $trace (traceprof.profile_top)"
PSQL_DB=app psql_app -c "SELECT function, self_samples, total_samples, round(self_percent::numeric, 1) AS self_pct
  FROM traceprof.profile_top('$trace', 15)"
PSQL_DB=app psql_app -Atc "SELECT stack || ' ' || samples FROM traceprof.profile('$trace') ORDER BY samples DESC" \
	> "$out/server.folded"
PSQL_DB=app psql_app -Atc "SELECT traceprof.flamegraph('$trace')" > "$out/server.svg"
PSQL_DB=app psql_app -Atc "SELECT traceprof.flamegraph_diff('$trace')" > "$out/server-diff.svg"
echo "server stacks of the trace: $(wc -l < "$out/server.folded") distinct ($out/server.folded)"
echo "flame graphs: $out/server.svg, $out/server-diff.svg (against the baseline of the same span names), $out/loader.svg"

step "artifacts in $out"
ls -l "$out" | sed 1d
echo
echo "Search Tempo (or any OTLP backend) for trace $trace."

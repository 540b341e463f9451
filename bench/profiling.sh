#!/bin/sh
# bench/profiling.sh - what self-profiling (PYROSCOPE_ENABLE, 100 Hz) costs
# the generator and the loader: the same run with the profiler off and on,
# interleaved over several rounds (the order alternates), medians.  With
# the profiler on, profiles really go out: to a local sink answering 200 on
# /ingest (bench/sink.py), at the default upload interval (10 s) and once
# more at exit.  Prints a table; asserts nothing.  Assumes `make`.
#
#   N_GEN=5000000 N_LOAD=1000000 ROUNDS=7 BENCH_DIR=/dev/shm bench/profiling.sh
#
# Wall time is the whole process, start-up and the final upload included;
# CPU is the process's user+system time (GNU time).  The generator writes
# to BENCH_DIR (default /dev/shm, so the disk does not add its noise); the
# loader loads into a throwaway PostgreSQL 15 cluster, table emptied
# (TRUNCATE + CHECKPOINT) before each run.  Tracing export is off
# (OTEL_* unset) in both cases.
set -eu

cd "$(dirname "$0")/.."
gen=build/bin/generator
loader=build/bin/loader
n_gen=${N_GEN:-5000000}
n_load=${N_LOAD:-1000000}
rounds=${ROUNDS:-7}
base=${BENCH_DIR:-}
if [ -z "$base" ]; then
	base=${TMPDIR:-/tmp}
	[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
fi

for bin in "$gen" "$loader"; do
	if [ ! -x "$bin" ]; then
		echo "bench/profiling.sh: $bin not found; run make first" >&2
		exit 1
	fi
done
if [ ! -x /usr/bin/time ]; then
	echo "bench/profiling.sh: /usr/bin/time not found (Debian package: time)" >&2
	exit 1
fi

. scripts/cluster.sh

dir=$(mktemp -d "$base/traceprof-bench-profiling.XXXXXX")
sink_pid=
cleanup() {
	set +e
	cluster_stop
	if [ -n "$sink_pid" ]; then
		kill "$sink_pid" 2>/dev/null
		wait "$sink_pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() {
	echo "bench/profiling.sh: $*" >&2
}

now() {
	date +%s.%N
}

python3 bench/sink.py "$dir/sink.port" &
sink_pid=$!
i=0
while [ ! -s "$dir/sink.port" ]; do
	kill -0 "$sink_pid" 2>/dev/null || { say "bench/sink.py did not start"; exit 1; }
	[ "$i" -lt 100 ] || { say "bench/sink.py did not write its port"; exit 1; }
	sleep 0.1
	i=$((i + 1))
done
sink_url="http://127.0.0.1:$(cat "$dir/sink.port")"

sink_requests() {
	curl -s "$sink_url/stats" | cut -d' ' -f1
}

# measure NAME MODE command...: one run with the profiler MODE (on|off);
# appends "name mode wall cpu uploads" to $dir/results.
measure() {
	m_name=$1 m_mode=$2 m_failed=0
	shift 2
	req0=$(sink_requests)
	t0=$(now)
	if [ "$m_mode" = on ]; then
		env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OTEL_TRACES_EXPORTER \
			PYROSCOPE_ENABLE=true PYROSCOPE_SERVER_ADDRESS="$sink_url" \
			/usr/bin/time -f '%U %S' -o "$dir/time" "$@" >"$dir/out" 2>&1 || m_failed=1
	else
		env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OTEL_TRACES_EXPORTER \
			-u PYROSCOPE_ENABLE \
			/usr/bin/time -f '%U %S' -o "$dir/time" "$@" >"$dir/out" 2>&1 || m_failed=1
	fi
	t1=$(now)
	if [ "$m_failed" = 1 ]; then
		say "failed: $*"
		cat "$dir/out" >&2
		exit 1
	fi
	req1=$(sink_requests)
	cpu=$(tail -n 1 "$dir/time" | awk '{ print $1 + $2 }')
	awk -v n="$m_name" -v m="$m_mode" -v a="$t0" -v b="$t1" -v c="$cpu" -v u="$((req1 - req0))" \
		'BEGIN { printf "%s %s %.4f %.2f %d\n", n, m, b - a, c, u }' >>"$dir/results"
	tail -n 1 "$dir/results" | awk '{ printf "  %-9s profiler %-3s %8.3f s wall %7.2f s CPU %3d uploads\n", $1, $2, $3, $4, $5 }' >&2
}

# Rounds alternate the order: off,on then on,off.
order_of() {
	if [ $(($1 % 2)) = 0 ]; then echo "off on"; else echo "on off"; fi
}

say "generator: $n_gen records to $dir, $rounds rounds"
# One unmeasured run warms the page cache and the file system.
"$gen" "$n_gen" "$dir/gen.json" >/dev/null 2>&1
rm -f "$dir/gen.json"
round=0
while [ "$round" -lt "$rounds" ]; do
	for mode in $(order_of "$round"); do
		measure generator "$mode" "$gen" "$n_gen" "$dir/gen.json"
		rm -f "$dir/gen.json"
	done
	round=$((round + 1))
done

say "loader: starting a PostgreSQL 15 cluster, $n_load records, $rounds rounds"
cluster_start >/dev/null
"$gen" "$n_load" "$dir/load.json" >/dev/null 2>&1
reset_table() {
	PSQL_DB=app psql_app -q -c "TRUNCATE orders" -c "CHECKPOINT"
}
# The first (unmeasured) load creates the table.
"$loader" "$CLUSTER_URL" "$dir/load.json" >/dev/null 2>&1
round=0
while [ "$round" -lt "$rounds" ]; do
	for mode in $(order_of "$round"); do
		reset_table
		measure loader "$mode" "$loader" "$CLUSTER_URL" "$dir/load.json"
	done
	round=$((round + 1))
done

awk -v rounds="$rounds" -v ng="$n_gen" -v nl="$n_load" -v cpus="$(nproc)" -v where="$base" '
	function median(list, count,    i, j, t) {
		for (i = 2; i <= count; i++)
			for (j = i; j > 1 && list[j - 1] > list[j]; j--) {
				t = list[j]; list[j] = list[j - 1]; list[j - 1] = t
			}
		return count % 2 ? list[(count + 1) / 2] : (list[count / 2] + list[count / 2 + 1]) / 2
	}
	{
		k = $1 SUBSEP $2; c = ++count[k]
		wall[k, c] = $3; cpu[k, c] = $4; uploads[k] += $5
	}
	END {
		printf "\nself-profiling (PYROSCOPE_ENABLE, 100 Hz, uploads to a local /ingest sink): %d CPUs,\n", cpus
		printf "%d rounds, order alternating; ratios within a round, medians over rounds\n\n", rounds
		printf "%-28s %10s %10s %11s %13s %9s %9s %10s %12s  %s\n", "binary", "wall off s", "wall on s",
			"wall ratio", "ratio range", "CPU off s", "CPU on s", "CPU ratio", "uploads/run", "target"
		split("generator loader", names, " ")
		desc["generator"] = sprintf("generator %d (%s)", ng, where)
		desc["loader"] = sprintf("loader %d", nl)
		for (b = 1; b <= 2; b++) {
			n = names[b]
			for (r = 1; r <= rounds; r++) {
				woff[r] = wall[n, "off", r]; won[r] = wall[n, "on", r]
				coff[r] = cpu[n, "off", r]; con[r] = cpu[n, "on", r]
				wr[r] = wall[n, "on", r] / wall[n, "off", r]
				cr[r] = cpu[n, "off", r] > 0 ? cpu[n, "on", r] / cpu[n, "off", r] : 0
			}
			lo = wr[1]; hi = wr[1]
			for (r = 2; r <= rounds; r++) { if (wr[r] < lo) lo = wr[r]; if (wr[r] > hi) hi = wr[r] }
			m = median(wr, rounds)
			printf "%-28s %10.3f %10.3f %11.4f %13s %9.2f %9.2f %10.4f %12.1f  %s\n", desc[n],
				median(woff, rounds), median(won, rounds), m, sprintf("%.3f..%.3f", lo, hi),
				median(coff, rounds), median(con, rounds), median(cr, rounds),
				uploads[n SUBSEP "on"] / rounds,
				sprintf("wall <= 1.02x: %s", m <= 1.02 ? "met" : "NOT met")
		}
	}' "$dir/results"
echo "wall: the whole process (start-up, final upload included); CPU: the process's user+system time (GNU time, 10 ms steps)."
echo "loader: wall time is bound by the server's COPY; its own CPU shows the profiler's cost on the client."

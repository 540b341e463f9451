#!/bin/sh
# bench/profiling.sh - what self-profiling (PYROSCOPE_ENABLE, 100 Hz) costs
# the generator and the loader: the same run with the profiler off, on,
# and off once more (an A/A control: how far two identical runs differ on
# this machine), interleaved over several rounds (the order rotates),
# medians.  With the profiler on, profiles really go out: to a local sink
# answering 200 on /ingest (bench/sink.py), at the default upload interval
# (10 s) and once more at exit.  Then, with valgrind, instruction counts
# (callgrind) of the same binaries at two input sizes, off and on, which
# machine noise does not touch.  Prints tables; asserts nothing.  Assumes
# `make`.
#
#   N_GEN=5000000 N_LOAD=1000000 ROUNDS=9 BENCH_DIR=/dev/shm bench/profiling.sh
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
rounds=${ROUNDS:-9}
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
. bench/awk_stats.sh

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

# measure NAME MODE command...: one run with the profiler MODE (on, off,
# off2); appends "name mode wall cpu uploads" to $dir/results.
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
	tail -n 1 "$dir/results" | awk '{ printf "  %-9s profiler %-4s %8.3f s wall %7.2f s CPU %3d uploads\n", $1, $2, $3, $4, $5 }' >&2
}

# The order rotates from round to round.
order_of() {
	case $(($1 % 3)) in
	0) echo "off on off2" ;;
	1) echo "on off2 off" ;;
	*) echo "off2 off on" ;;
	esac
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
# shellcheck disable=SC2119 # no extra postgresql.conf lines
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

# Instructions (callgrind), two input sizes per binary, profiler off and
# on: what the profiler adds per run and per record, free of machine noise.
# Under valgrind the process's CPU clock runs ~50x slower than natively per
# unit of work, so the profiler takes ~50x more samples per record than it
# would natively: the per-record figure is an upper bound.
callgrind_ir() {	# callgrind_ir MODE command...: instructions, all threads
	c_mode=$1
	shift
	rm -f "$dir/cg.out"
	if [ "$c_mode" = on ]; then
		env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OTEL_TRACES_EXPORTER \
			PYROSCOPE_ENABLE=true PYROSCOPE_SERVER_ADDRESS="$sink_url" \
			valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$@" >"$dir/out" 2>&1
	else
		env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OTEL_TRACES_EXPORTER \
			-u PYROSCOPE_ENABLE \
			valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$@" >"$dir/out" 2>&1
	fi || { say "failed under callgrind: $*"; cat "$dir/out" >&2; exit 1; }
	awk '/^(totals|summary):/ { print $2; exit }' "$dir/cg.out"
}
if command -v valgrind >/dev/null 2>&1; then
	say "instructions (callgrind): generator and loader at two sizes, profiler off and on"
	for n in 100000 300000; do
		for mode in off on; do
			echo "generator $n $mode $(callgrind_ir "$mode" "$gen" "$n" "$dir/gen.json")" >>"$dir/cg.results"
			rm -f "$dir/gen.json"
		done
	done
	for n in 50000 150000; do
		"$gen" "$n" "$dir/cg.json" >/dev/null 2>&1
		for mode in off on; do
			reset_table
			echo "loader $n $mode $(callgrind_ir "$mode" "$loader" "$CLUSTER_URL" "$dir/cg.json")" >>"$dir/cg.results"
		done
		rm -f "$dir/cg.json"
	done
fi

awk -v rounds="$rounds" -v ng="$n_gen" -v nl="$n_load" -v cpus="$(nproc)" -v where="$base" \
	-v summary="${BENCH_SUMMARY:-}" "$AWK_STATS"'
	function lowest(list, count,    i, lo) {
		lo = list[1]
		for (i = 2; i <= count; i++) if (list[i] < lo) lo = list[i]
		return lo
	}
	function highest(list, count,    i, hi) {
		hi = list[1]
		for (i = 2; i <= count; i++) if (list[i] > hi) hi = list[i]
		return hi
	}
	# row NAME MODE: MODE against "off", one line of the table.
	function row(n, mode, label,    r, m) {
		for (r = 1; r <= rounds; r++) {
			woff[r] = wall[n, "off", r]; wx[r] = wall[n, mode, r]
			wr[r] = wall[n, mode, r] / wall[n, "off", r]
			cr[r] = cpu[n, "off", r] > 0 ? cpu[n, mode, r] / cpu[n, "off", r] : 0
		}
		m = median(wr, rounds)
		printf "%-34s %10.3f %10.3f %11.4f %13s %10.4f %10.4f %8.1f  %s\n", label,
			median(woff, rounds), median(wx, rounds), m,
			sprintf("%.3f..%.3f", lowest(wr, rounds), highest(wr, rounds)),
			lowest(wx, rounds) / lowest(woff, rounds), median(cr, rounds),
			uploads[n SUBSEP mode] / rounds,
			mode == "on" ? sprintf("wall <= 1.02x: %s", m <= 1.02 ? "met" : "NOT met") : "(noise floor)"
		if (summary != "")
			printf "profiling|%s: wall / CPU ratio to profiler off|%.3fx / %.3fx|%s\n", label, m, median(cr, rounds),
				mode == "on" ? "wall <= 1.02x" : "noise floor" >>summary
	}
	{
		k = $1 SUBSEP $2; c = ++count[k]
		wall[k, c] = $3; cpu[k, c] = $4; uploads[k] += $5
	}
	END {
		printf "\nself-profiling (PYROSCOPE_ENABLE, 100 Hz, uploads to a local /ingest sink): %d CPUs,\n", cpus
		printf "%d rounds, order rotating; ratios to the same round'"'"'s profiler-off run, medians over rounds\n\n", rounds
		printf "%-34s %10s %10s %11s %13s %10s %10s %8s  %s\n", "binary / compared run", "wall off s", "wall s",
			"wall ratio", "ratio range", "best-of", "CPU ratio", "uploads", "target"
		row("generator", "on", sprintf("generator %d, profiler on", ng))
		row("generator", "off2", "generator, off again (A/A)")
		row("loader", "on", sprintf("loader %d, profiler on", nl))
		row("loader", "off2", "loader, off again (A/A)")
	}' "$dir/results"
echo "wall: the whole process (start-up, final upload included), generator output in $base; best-of: fastest run / fastest"
echo "profiler-off run; CPU: the process's user+system time (GNU time, 10 ms steps); uploads: /ingest requests per run."
echo "A/A: a second profiler-off run in the same round: how far two identical runs differ on this machine now."
echo "loader: wall time is bound by the server's COPY; its own CPU shows the profiler's cost on the client."

if [ -s "$dir/cg.results" ]; then
	awk -v ng="$n_gen" -v nl="$n_load" -v summary="${BENCH_SUMMARY:-}" '
		{ ir[$1, $2, $3] = $4; if (!($1 SUBSEP "lo" in n)) n[$1, "lo"] = $2; n[$1, "hi"] = $2 }
		END {
			printf "\ninstructions (callgrind, user space, all threads; profiler on minus off at two sizes)\n"
			printf "%-10s %14s %16s %16s %20s %26s\n", "binary", "records", "instr/record off",
				"profiler fixed", "profiler per record", "projected overhead at N"
			split("generator loader", names, " ")
			for (b = 1; b <= 2; b++) {
				x = names[b]; lo = n[x, "lo"]; hi = n[x, "hi"]
				per_off = (ir[x, hi, "off"] - ir[x, lo, "off"]) / (hi - lo)
				d_lo = ir[x, lo, "on"] - ir[x, lo, "off"]; d_hi = ir[x, hi, "on"] - ir[x, hi, "off"]
				per_on = (d_hi - d_lo) / (hi - lo)
				fixed = d_lo - per_on * lo
				base = ir[x, lo, "off"] - per_off * lo
				big = x == "generator" ? ng : nl
				projected = 100 * (fixed + (per_on > 0 ? per_on : 0) * big) / (base + per_off * big)
				printf "%-10s %14s %16.0f %16.0f %20.1f %17.3f%% (N=%d)\n", x, lo "/" hi, per_off, fixed, per_on,
					projected, big
				if (summary != "")
					printf "profiling|%s %d, profiler on: instructions added (callgrind)|%.2f%%|<= 2%%\n",
						x, big, projected >>summary
			}
		}' "$dir/cg.results"
	echo "profiler fixed: instructions the profiler adds once per run (start, symbolization, pprof, gzip, upload);"
	echo "per record: what it adds per record under valgrind, where ~50x more samples fall per record than natively"
	echo "(an upper bound, counted only when positive); projected: (fixed + per record x N) / instructions of the"
	echo "profiler-off run at N, the N of the wall-time table.  Loader: client instructions only (not the server's)."
fi

#!/bin/sh
# bench/loader.sh - loader (binary COPY) against psql's \copy of the same
# rows as CSV, on a throwaway PostgreSQL 15 cluster.  Prints a table;
# asserts nothing.  Assumes `make` (build/bin/loader, build/bin/generator).
#
#   N=1000000 N_BIG=4000000 RUNS=3 BENCH_DIR=/some/disk bench/loader.sh
#
# Per method, the best wall time of RUNS loads into the emptied table
# (TRUNCATE + CHECKPOINT before each), with the server CPU that load cost:
# utime+stime of every postgres process from /proc, the postmaster's
# cutime/cstime included so that backends which exited are counted.  The
# loader's peak RSS (GNU time %M) is measured for N and N_BIG records, to
# show that memory does not grow with the file.
set -eu

cd "$(dirname "$0")/.."
. bench/summary.sh
loader=build/bin/loader
gen=build/bin/generator
n=${N:-1000000}
n_big=${N_BIG:-4000000}
runs=${RUNS:-3}

for bin in "$loader" "$gen"; do
	if [ ! -x "$bin" ]; then
		echo "bench/loader.sh: $bin not found; run make first" >&2
		exit 1
	fi
done
if [ ! -x /usr/bin/time ]; then
	echo "bench/loader.sh: /usr/bin/time not found (Debian package: time)" >&2
	exit 1
fi

. scripts/cluster.sh

dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/traceprof-bench-loader.XXXXXX")
cleanup() {
	cluster_stop
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() {
	date +%s.%N
}

# Wait until no client backend is left, so its CPU time is in cutime.
# (sh has no local variables: every function uses names of its own.)
settle() {
	settle_try=0
	while [ "$settle_try" -lt 100 ]; do
		left=$(psql_app -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
		[ "$left" = 0 ] && break
		sleep 0.05
		settle_try=$((settle_try + 1))
	done
	sleep 0.2
}

reset_table() {
	PSQL_DB=app psql_app -q -c "TRUNCATE orders" -c "CHECKPOINT"
	settle
}

# Run "$@" once: sets wall (s), cpu (server s), rss (client KiB).
measure() {
	t_before=$(server_ticks)
	t0=$(now)
	/usr/bin/time -f %M -o "$dir/rss" "$@" >"$dir/out" 2>&1 || {
		echo "bench/loader.sh: failed: $*" >&2
		cat "$dir/out" >&2
		exit 1
	}
	t1=$(now)
	settle
	t_after=$(server_ticks)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	cpu=$(awk -v a="$t_before" -v b="$t_after" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')
	rss=$(tail -n 1 "$dir/rss")
}

# Best of $runs: sets best_wall, best_cpu, best_rss.
best_of() {
	best_wall=""
	run_no=0
	while [ "$run_no" -lt "$runs" ]; do
		reset_table
		measure "$@"
		if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
			best_wall=$wall
			best_cpu=$cpu
			best_rss=$rss
		fi
		run_no=$((run_no + 1))
	done
}

echo "bench/loader.sh: starting a PostgreSQL 15 cluster, generating $n records" >&2
cluster_start >/dev/null
"$gen" "$n" "$dir/orders.json" >/dev/null 2>&1

# The loader creates the table; then the same rows go out as CSV.
measure "$loader" "$CLUSTER_URL" "$dir/orders.json"
PSQL_DB=app psql_app -q -c "COPY orders TO '$CLUSTER_DIR/orders.csv' (FORMAT csv)"
rows=$(PSQL_DB=app psql_app -At -c "SELECT count(*) FROM orders")

printf 'bench/loader.sh: %s runs each of psql \\copy and loader (%s rows)\n' "$runs" "$rows" >&2
best_of psql -X -q "$CLUSTER_URL" -c "\\copy orders from '$CLUSTER_DIR/orders.csv' csv"
copy_wall=$best_wall copy_cpu=$best_cpu copy_rss=$best_rss
best_of "$loader" "$CLUSTER_URL" "$dir/orders.json"
load_wall=$best_wall load_cpu=$best_cpu load_rss=$best_rss

echo "bench/loader.sh: peak RSS for $n_big records" >&2
rm -f "$dir/orders.json"
"$gen" "$n_big" "$dir/big.json" >/dev/null 2>&1
reset_table
measure "$loader" "$CLUSTER_URL" "$dir/big.json"
big_rss=$rss big_wall=$wall
json_mb=$(awk -v b="$(stat -c %s "$dir/big.json")" 'BEGIN { printf "%.0f", b / 1e6 }')
rm -f "$dir/big.json"

csv_mb=$(awk -v b="$(stat -c %s "$CLUSTER_DIR/orders.csv")" 'BEGIN { printf "%.0f", b / 1e6 }')
server_version=$(psql_app -At -c "SHOW server_version" | cut -d' ' -f1)

awk -v rows="$rows" -v lw="$load_wall" -v lc="$load_cpu" -v lr="$load_rss" \
	-v cw="$copy_wall" -v cc="$copy_cpu" -v cr="$copy_rss" \
	-v n="$n" -v nb="$n_big" -v br="$big_rss" -v bw="$big_wall" -v jmb="$json_mb" \
	-v csvmb="$csv_mb" -v ver="$server_version" -v cpus="$(nproc)" -v runs="$runs" '
BEGIN {
	printf "\nloader vs psql \\copy: %d rows, PostgreSQL %s, %d CPUs, best of %d runs\n\n", rows, ver, cpus, runs
	printf "%-28s %9s %10s %14s %15s %14s\n", "method", "wall s", "rows/s", "server CPU s", "server us/row", "client RSS"
	printf "%-28s %9.2f %10.0f %14.2f %15.2f %11.1f MB\n", "loader (JSON, binary COPY)", lw, rows / lw, lc, lc * 1e6 / rows, lr / 1024
	printf "%-28s %9.2f %10.0f %14.2f %15.2f %11.1f MB\n", "psql \\copy (CSV, " csvmb " MB)", cw, rows / cw, cc, cc * 1e6 / rows, cr / 1024
	printf "\nratio loader / \\copy (rows/s): %.2f\n", cw / lw
	printf "loader peak RSS: %.1f MB for %d records, %.1f MB for %d records (%s MB of JSON, %.0f rows/s)\n",
		lr / 1024, n, br / 1024, nb, jmb, nb / bw
}'
summary_row loader "loader / psql \\copy, rows/s ($rows rows)" \
	"$(awk -v l="$load_wall" -v c="$copy_wall" 'BEGIN { printf "%.2fx", c / l }')" ">= 1.0x"
summary_row loader "loader peak RSS, $n / $n_big records" \
	"$(awk -v a="$load_rss" -v b="$big_rss" 'BEGIN { printf "%.1f / %.1f MB", a / 1024, b / 1024 }')" "flat"

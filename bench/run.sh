#!/bin/sh
# bench/run.sh - every benchmark, one after the other; each prints its own
# tables of figures measured side by side in the same run, and the main
# figures of all of them are gathered into one table at the end.  Nothing
# here asserts: tests assert behaviour, benchmarks report.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BENCH_SUMMARY=$(mktemp "${TMPDIR:-/tmp}/traceprof-bench-summary.XXXXXX")
export BENCH_SUMMARY
trap 'rm -f "$BENCH_SUMMARY"' EXIT

for bench in generator loader sampler profiling exporter pgbench; do
	echo "### $bench"
	"$here/$bench.sh"
	echo
done

echo "### all benchmarks, one table ($(nproc) CPUs, $(uname -r), traceprof $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown))"
awk -F'|' '
	BEGIN { printf "%-10s %-88s %-24s %s\n", "benchmark", "measure", "value", "target" }
	{ printf "%-10s %-88s %-24s %s\n", $1, $2, $3, $4 }' "$BENCH_SUMMARY"

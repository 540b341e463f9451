#!/bin/sh
# bench/run.sh - every benchmark, one after the other; each prints its own
# table of figures measured side by side in the same run.  Nothing here
# asserts: tests assert behaviour, benchmarks report.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
for bench in generator loader sampler profiling pgbench; do
	echo "### $bench"
	"$here/$bench.sh"
	echo
done

#!/bin/sh
# run-sanitize-checks.sh - common/, generator, loader and the unit tests
# built with AddressSanitizer and UBSan into build/asan/ (gcc by default,
# SANITIZE_CC=clang works too), then every unit test and a small generator
# + loader workload (scripts/checked-workload.sh) against a throwaway
# PostgreSQL cluster.  Any sanitizer report fails the run.
#
# The sampler's stack reads are exempt from ASan (RAW_STACK_READS in
# common/stack_walk.c): they read raw stack words, redzones included.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=build/asan
records=${SANITIZE_RECORDS:-20000}
cc=${SANITIZE_CC:-gcc}

command -v "$cc" >/dev/null 2>&1 || { echo "run-sanitize-checks: $cc not found" >&2; exit 1; }
unit_tests=$(ls tests/unit/test_*.c | sed "s|tests/unit/|$out/tests/|; s|\.c\$||")
${MAKE:-make} --no-print-directory -s BUILD=$out CC="$cc" \
	CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all" \
	$out/bin/generator $out/bin/loader $unit_tests

# Reports on stderr, with stacks; leaks are errors (LeakSanitizer).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86
export UBSAN_OPTIONS=print_stacktrace=1:exitcode=86

WORK=$(mktemp -d /tmp/traceprof-asan.XXXXXX)
chmod 755 "$WORK"
. "$root/scripts/cluster.sh"
. "$root/scripts/checked-workload.sh"
trap 'cluster_stop; rm -rf "$WORK"' EXIT

for t in $unit_tests; do
	checked "unit-$(basename "$t")" 0 "$t"
done
cluster_start
checked_workload "$root/$out/bin" "$records" env
echo "run-sanitize-checks: unit tests, generator and loader clean under ASan+UBSan"

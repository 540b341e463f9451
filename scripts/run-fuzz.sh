#!/bin/sh
# run-fuzz.sh - build the libFuzzer targets (tests/fuzz/*.c) with clang,
# ASan and UBSan into build/fuzz/ (apart from the gcc build), then run each
# for FUZZ_SECONDS (default 60) over its seeds in tests/fuzz/corpus/<name>/.
#
#   scripts/run-fuzz.sh [name...]      # all targets when none is named
#
# FUZZ_JOBS targets run at once (default: the number of CPUs).  Inputs that
# find new coverage go to build/fuzz/corpus/<name>/ (kept between runs);
# a failing input is saved as build/fuzz/artifacts/<name>-crash-<sha1>: fix
# the bug, then copy the file into tests/fuzz/corpus/<name>/ as a
# regression seed.  A missing compiler or fuzzer runtime is an error.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-$(nproc)}
clang=${FUZZ_CC:-clang}
out=build/fuzz
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-O1 -g -fno-omit-frame-pointer $sanitize"

fail() { echo "run-fuzz: $*" >&2; exit 1; }

command -v "$clang" >/dev/null 2>&1 || fail "$clang not found (make deps installs clang)"
runtime=$("$clang" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
[ -f "$runtime" ] || runtime="$("$clang" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
[ -f "$runtime" ] || fail "the libFuzzer runtime of $clang is missing (make deps installs libclang-rt-14-dev)"

if [ $# -gt 0 ]; then
	targets="$*"
else
	targets=$(ls tests/fuzz/*.c | sed 's|.*/||; s|\.c$||')
fi

# The code under test, instrumented for coverage, through the top-level
# Makefile's own rules (BUILD= keeps every object under build/fuzz/).
loader_objs="$out/obj/loader/json_reader.o $out/obj/loader/order_row.o $out/obj/loader/pg_binary.o"
${MAKE:-make} --no-print-directory -s BUILD=$out CC="$clang" \
	CFLAGS="$cflags -fsanitize=fuzzer-no-link" $out/libtraceprof_common.a $loader_objs

mkdir -p "$out/bin" "$out/logs" "$out/artifacts"
for t in $targets; do
	[ -f "tests/fuzz/$t.c" ] || fail "no target tests/fuzz/$t.c"
	[ -n "$(ls "tests/fuzz/corpus/$t" 2>/dev/null)" ] || fail "no seeds in tests/fuzz/corpus/$t/"
	"$clang" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $cflags -fsanitize=fuzzer \
		-Icommon -Iloader -I$out/proto -o "$out/bin/$t" "tests/fuzz/$t.c" \
		$loader_objs $out/libtraceprof_common.a -lcurl -lprotobuf-c -lz -lm
done

run_one() {
	t=$1
	mkdir -p "$out/corpus/$t"
	"$out/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
		"$out/corpus/$t" "tests/fuzz/corpus/$t" >"$out/logs/$t.log" 2>&1
}

report() {
	t=$1
	status=$2
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/logs/$t.log")
	corpus=$(ls "$out/corpus/$t" | wc -l)
	if [ "$status" = 0 ]; then
		echo "fuzz $t: ${seconds}s, ${runs:-?} runs, $corpus inputs in build/fuzz/corpus/$t: ok"
		return 0
	fi
	echo "fuzz $t: FAILED (exit $status); last lines of $out/logs/$t.log:"
	grep -v '^#[0-9]\|^INFO:\|^stat::' "$out/logs/$t.log" | tail -n 40 | sed 's/^/  /'
	echo "  reproduce: $out/bin/$t $out/artifacts/$t-<file above>"
	return 1
}

failed=0
set -- $targets
while [ $# -gt 0 ]; do
	running=""				# "pid:target ..."
	while [ $# -gt 0 ] && [ $(echo $running | wc -w) -lt "$jobs" ]; do
		run_one "$1" &
		running="$running $!:$1"
		shift
	done
	for entry in $running; do
		status=0
		wait "${entry%%:*}" || status=$?
		report "${entry#*:}" "$status" || failed=1
	done
done
exit $failed

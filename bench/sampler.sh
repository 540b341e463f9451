#!/bin/sh
# bench/sampler.sh - what sampling costs: instructions per stack capture
# (callgrind; this VM has no PMU for perf stat), CPU overhead of a 20-deep
# CPU-bound loop sampled at 100 and 250 Hz next to the same loop unsampled,
# how often the walk gets the whole stack (with and without the repair of
# frameless leaves), pause/resume, drain and symbolization costs.  Prints
# tables; asserts nothing.  Needs cc; valgrind optional.
#
#   RUNS=7 SECONDS_PER_RUN=1 bench/sampler.sh
set -eu

cd "$(dirname "$0")/.."
. bench/summary.sh
. bench/awk_stats.sh
runs=${RUNS:-7}
secs=${SECONDS_PER_RUN:-1}

dir=$(mktemp -d "${TMPDIR:-/tmp}/traceprof-bench-sampler.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Same flags as the Makefile for common/; the bench's own functions keep
# frame pointers as Debian's postgres does.  sampler.c is compiled here
# (twice: with and without the frameless-leaf repair); the rest of common/
# comes from the library `make` built.
bin=$dir/sampler_bench
lib=build/libtraceprof_common.a
if [ ! -f "$lib" ]; then
	echo "bench/sampler.sh: $lib not found; run make first" >&2
	exit 1
fi
build() {	# build OUTPUT [CFLAGS...]
	out=$1
	shift
	${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fno-omit-frame-pointer -Icommon "$@" -o "$out" \
		bench/sampler_bench.c common/sampler.c "$lib" -lcurl -lprotobuf-c -lunwind-generic -lunwind -lz -lm
}
build "$bin"
# The same without the frameless-leaf repair, to show what it brings.
build "$bin.norepair" -DTP_SAMPLER_NO_LEAF_REPAIR

field() {	# field NAME "text" -> the word after NAME
	echo "$2" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }'
}

# Instructions callgrind counts inside the functions named by --toggle-collect.
callgrind_ir() {
	out=$dir/cg.out
	opts=$1
	shift
	# shellcheck disable=SC2086 # opts holds several options
	valgrind --tool=callgrind --callgrind-out-file="$out" $opts "$bin" "$@" >"$dir/cg.stdout" 2>/dev/null
	awk '/^(totals|summary):/ { print $2; exit }' "$out"
	rm -f "$out"
}

echo "sampler: instructions per stack capture (callgrind, 20 frames of bench_level + main)"
printf '%-44s %14s\n' "capture" "instructions"
if command -v valgrind >/dev/null 2>&1; then
	# Differences between two run lengths cancel one-off costs (the first
	# backtrace() loads libgcc_s).
	a=$(callgrind_ir --toggle-collect=tp_stack_walk_code walk 1000)
	b=$(callgrind_ir --toggle-collect=tp_stack_walk_code walk 3000)
	depth=$(field depth "$("$bin" walk 1)")
	printf '%-44s %14s\n' "frame-pointer walk, depth $depth (ours)" "$(( (b - a) / 2000 ))"
	summary_row sampler "instructions per stack walk ($depth frames, frame pointers)" "$(( (b - a) / 2000 ))" "<= 1,000"
	# The same stack under a JIT frame (x86_64): the walk steps over it
	# from a function it calls, or starts in it (after libunwind).
	if [ "$(uname -m)" = x86_64 ]; then
		set -- $("$bin" jitwalk 1)
		a=$(callgrind_ir --toggle-collect=tp_stack_walk_code jitwalk 1000)
		b=$(callgrind_ir --toggle-collect=tp_stack_walk_code jitwalk 3000)
		printf '%-44s %14s\n' "  under a JIT frame, depth $2" "$(( (b - a) / 2000 ))"
		a=$(callgrind_ir --toggle-collect=tp_stack_walk_jit jitwalk 1000)
		b=$(callgrind_ir --toggle-collect=tp_stack_walk_jit jitwalk 3000)
		printf '%-44s %14s\n' "  from JIT code (after libunwind), depth $4" "$(( (b - a) / 2000 ))"
	fi
	a=$(callgrind_ir "--toggle-collect=backtrace --toggle-collect=__backtrace" backtrace 200)
	b=$(callgrind_ir "--toggle-collect=backtrace --toggle-collect=__backtrace" backtrace 600)
	printf '%-44s %14s\n' "glibc backtrace() (DWARF unwind)" "$(( (b - a) / 400 ))"
	# A signal handler is entered without a call, which --toggle-collect
	# does not see: take its inclusive cost from the whole profile.
	valgrind --tool=callgrind --callgrind-out-file="$dir/cg.handler" "$bin" handler 2 \
		>"$dir/cg.stdout" 2>/dev/null
	# The handler's inclusive cost, split by path: samples taken in code
	# with frame pointers (postgres's own) walk the chain; the others
	# (libc, libcrypto) go through libunwind.  Handler entries = calls of
	# tp_stack_regs_get; libunwind samples = calls of tp_dwarf_unwind.
	set -- $(callgrind_annotate --tree=calling --inclusive=yes --threshold=100 "$dir/cg.handler" 2>/dev/null |
		awk '/\* .*:sample_handler / { in_handler = 1; gsub(",", "", $1); total = $1; next }
			in_handler && /^ *$/ { in_handler = 0 }
			in_handler && /tp_dwarf_unwind / { gsub(",", "", $1); dwarf = $1; match($0, /\(([0-9,]+)x\)/); d = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", d); dwarf_calls = d }
			in_handler && /tp_stack_regs_get / { match($0, /\(([0-9,]+)x\)/); e = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", e); entries = e }
			END { print total + 0, dwarf + 0, dwarf_calls + 0, entries + 0 }')
	total=$1 dwarf=$2 dwarf_calls=$3 entries=$4
	fp_samples=$((entries - dwarf_calls))
	if [ "$fp_samples" -gt 0 ]; then
		fp_ir=$(((total - dwarf) / fp_samples))
		printf '%-44s %14s\n' "whole signal handler, frame-pointer code" "$fp_ir"
		summary_row sampler "instructions per sample in frame-pointer code, whole handler" "$fp_ir" "<= 1,000"
		if [ "$dwarf_calls" -gt 0 ]; then
			printf '%-44s %14s\n' "  + libunwind, code without frame pointers" "$((dwarf / dwarf_calls))"
			echo "  ($dwarf_calls of $entries samples of this run took the libunwind path)"
		fi
		echo "  (user space only; signal delivery is kernel work, 2.6-6.3 us a round trip here)"
	fi
else
	echo "(valgrind not installed: no instruction counts)"
fi
echo

# Calibrate the loop to about $secs CPU seconds unsampled.
probe=$("$bin" loop 0 50000000)
cpu=$(field cpu "$probe")
iters=$(awk -v c="$cpu" -v s="$secs" 'BEGIN { printf "%d", 50000000 * s / c }')

echo "sampler: CPU overhead, 20-deep CPU-bound loop of $iters iterations, $runs rounds (process CPU time)"
echo "  each round runs unsampled, 100 Hz and 250 Hz back to back (order rotated); ratios are"
echo "  to the same round's unsampled run, so slow drifts of the machine cancel"
i=0
while [ "$i" -lt "$runs" ]; do
	case $((i % 3)) in
		0) order="0 100 250" ;;
		1) order="100 250 0" ;;
		*) order="250 0 100" ;;
	esac
	for hz in $order; do
		res=$("$bin" loop "$hz" "$iters")
		echo "$i $hz $(field cpu "$res") $(field samples "$res") $(field full "$res")" >>"$dir/loop.txt"
	done
	i=$((i + 1))
done
awk "$AWK_STATS"'
	{ cpu[$1, $2] = $3; n[$1, $2] = $4; f[$1, $2] = $5; if ($1 + 1 > rounds) rounds = $1 + 1 }
	END {
		printf "%-10s %12s %14s %19s %9s %12s %17s\n", "sampling", "median cpu s", "median ratio",
			"ratio range", "samples", "full stacks", "cost/sample (us)"
		for (r = 0; r < rounds; r++) base[r + 1] = cpu[r, 0]
		printf "%-10s %12.4f %14s %19s %9s %12s %17s\n", "off", median(base, rounds), "1.0000",
			"-", "-", "-", "-"
		split("100 250", rates, " ")
		for (k = 1; k <= 2; k++) {
			hz = rates[k]; lo = ""; hi = ""; samples = 0; full = 0
			for (r = 0; r < rounds; r++) {
				ratio[r + 1] = cpu[r, hz] / cpu[r, 0]
				if (lo == "" || ratio[r + 1] < lo) lo = ratio[r + 1]
				if (hi == "" || ratio[r + 1] > hi) hi = ratio[r + 1]
				samples += n[r, hz]; full += f[r, hz]
			}
			m = median(ratio, rounds)
			range = sprintf("%.4f..%.4f", lo, hi)
			printf "%-10s %12s %14.4f %19s %9.0f %11.1f%% %17.2f\n", hz " Hz", "-", m, range,
				samples / rounds, samples ? 100 * full / samples : 0,
				samples ? (m - 1) * median(base, rounds) / (samples / rounds) * 1e6 : 0
		}
	}' "$dir/loop.txt"
echo

# The sampler's cost is almost all signal delivery; at 250 Hz it hides in
# the noise above, so measure one round trip at a rate where it shows.
echo "sampler: signal round trip (empty handler, 10 kHz wall-clock timer), $runs rounds"
i=0
while [ "$i" -lt "$runs" ]; do
	a=$("$bin" signal 0 "$iters")
	b=$("$bin" signal 10000 "$iters")
	echo "$(field cpu "$a") $(field cpu "$b") $(field signals "$b")" >>"$dir/signal.txt"
	i=$((i + 1))
done
awk '
	{ d[NR] = ($2 - $1) / $3 * 1e6 }
	END {
		for (i = 2; i <= NR; i++)
			for (j = i; j > 1 && d[j - 1] > d[j]; j--) { t = d[j]; d[j] = d[j - 1]; d[j - 1] = t }
		m = NR % 2 ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2
		printf "%-44s %8.2f us (range %.2f..%.2f)\n", "CPU per delivered signal, median", m, d[1], d[NR]
		printf "%-44s %7.3f%% at 100 Hz, %.3f%% at 250 Hz\n", "=> sampling overhead estimate",
			m * 100 / 1e4, m * 250 / 1e4
		printf "%.3f%% / %.3f%%\n", m * 100 / 1e4, m * 250 / 1e4 >"/dev/fd/3"
	}' "$dir/signal.txt" 3>"$dir/signal.summary"
summary_row sampler "CPU overhead of sampling at 100 / 250 Hz (signal round trips)" "$(cat "$dir/signal.summary")"
echo

echo "sampler: whole stacks when the PC is in a frameless leaf, 2 s CPU at 250 Hz each"
printf '%-52s %14s %14s\n' "case" "leaf repair" "walk only"
a=$("$bin" handler 2)
b=$("$bin.norepair" handler 2)
awk -v sa="$(field samples "$a")" -v fa="$(field full "$a")" \
	-v sb="$(field samples "$b")" -v fb="$(field full "$b")" 'BEGIN {
	printf "%-52s %13.1f%% %13.1f%%\n", "own leaf without frame: all 20 callers present",
		sa ? 100 * fa / sa : 0, sb ? 100 * fb / sb : 0 }'
a=$("$bin" libc 2)
b=$("$bin.norepair" libc 2)
awk -v la="$(field in_libc "$a")" -v ka="$(field caller_kept "$a")" \
	-v lb="$(field in_libc "$b")" -v kb="$(field caller_kept "$b")" 'BEGIN {
	printf "%-52s %13.1f%% %13.1f%%\n", "PC in libc memset: its caller present",
		la ? 100 * ka / la : 0, lb ? 100 * kb / lb : 0
	printf "%-52s %14d %14d\n", "  (samples in memset)", la, lb }'
echo

echo "sampler: other costs"
res=$("$bin" pause 100000)
printf '%-44s %8s ns\n' "pause + resume pair (3 syscalls)" "$(field ns_per_pair "$res")"
res=$("$bin" drain 2)
printf '%-44s %8s us\n' "drain, per sample (leaf repair included)" "$(field drain_us_per_sample "$res")"
res=$("$bin" symbolize)
printf '%-44s %8s ms\n' "tp_symbols_load (reads /proc/self/maps)" "$(field load_ms "$res")"
printf '%-44s %8s us\n' "drain + symbolize ~24 frames, per sample" "$(field drain_us_per_sample "$res")"
echo "  (includes parsing the bench binary's and libc's symbols on first use)"

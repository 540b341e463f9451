# bench/summary.sh - sourced by the benchmarks.  summary_row records one
# figure for the table bench/run.sh prints at the end of a run; with
# BENCH_SUMMARY unset (a benchmark run alone) it records nothing.

summary_row() {	# summary_row BENCHMARK MEASURE VALUE [TARGET]
	[ -n "${BENCH_SUMMARY:-}" ] || return 0
	printf '%s|%s|%s|%s\n' "$1" "$2" "$3" "${4:-}" >>"$BENCH_SUMMARY"
}

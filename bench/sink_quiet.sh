# bench/sink_quiet.sh - sourced by the benchmarks that export to
# bench/sink.py.  sink_quiet URL returns once the sink at URL received no
# byte in three polls 0.2 s apart (the exporter's rounds are 200 ms apart
# in these benchmarks), at most 60 s; false, saying so, after that.
#
# Benchmarks wait for it, not for traceprof.stats to show nothing pending:
# a session costs this VM's server ~40 ms of CPU to start (as much as
# ~1,000 selects), and asking the exporting cluster alone, every 0.1 s
# until its exporter drained, had put 1-2% of its CPU into every export
# run.

sink_quiet() {
	last='' same=0
	for _ in $(seq 1 300); do
		now=$(curl -s "$1/stats")
		if [ "$now" = "$last" ]; then
			same=$((same + 1))
			[ "$same" -lt 3 ] || return 0
		else
			same=0 last=$now
		fi
		sleep 0.2
	done
	echo "the sink at $1 still received data after 60 s" >&2
	return 1
}

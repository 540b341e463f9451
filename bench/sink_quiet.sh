# bench/sink_quiet.sh - sourced by the benchmarks that export to
# bench/sink.py.  sink_quiet URL returns once the sink at URL answered the
# same counts for three polls after a first, 0.2 s apart (0.6 s without a
# byte; the exporter's rounds are 200 ms apart in these benchmarks); false,
# saying so, when that did not happen within 60 s or the sink did not
# answer.
#
# Benchmarks wait for it, not for traceprof.stats to show nothing pending:
# a session costs this VM's server 45-50 ms of CPU to start (as much as
# 500-900 selects), and asking the exporting cluster alone, every 0.1 s
# until its exporter drained, had put 1-3% of its CPU into every export
# run.  Quiet is not drained (an exporter backing off between retries is
# quiet too): the callers check spans_pending once the CPU is read.

sink_quiet() {
	sink_last='' sink_same=0 sink_until=$(($(date +%s) + 60))
	while [ "$(date +%s)" -lt "$sink_until" ]; do
		if ! sink_now=$(curl -sf -m 2 "$1/stats"); then
			echo "the sink at $1 did not answer" >&2
			return 1
		fi
		if [ "$sink_now" = "$sink_last" ]; then
			sink_same=$((sink_same + 1))
			[ "$sink_same" -lt 3 ] || return 0
		else
			sink_same=0 sink_last=$sink_now
		fi
		sleep 0.2
	done
	echo "the sink at $1 still received data after 60 s" >&2
	return 1
}

#!/bin/sh
# bench/pgbench.sh - what the extension costs a pgbench workload, in TPS
# and in server CPU per transaction, next to the same cluster setup without
# it; and how many frames of a server profile have a name.  Prints tables;
# asserts nothing.  Assumes `make install-extension` (and root, or a user
# that may run initdb/postgres: see scripts/cluster.sh).
#
#   SECONDS_PER_RUN=5 ROUNDS=5 SCALE=10 CLIENTS=4 THREADS=2 bench/pgbench.sh
#   SECTIONS="frames instructions" bench/pgbench.sh     # parts only
#
# Two throwaway clusters with the same settings and the same pgbench data:
# A without shared_preload_libraries, B with traceprof preloaded.  B is
# switched between configurations with ALTER SYSTEM + pg_reload_conf():
#
#   none    cluster A, no extension
#   idle    traceprof loaded, nothing traced (sample_rate 0, no traceparent)
#   trace   sample_rate 1 (a new trace per statement), profile off, no
#           export, the other settings at their defaults (no plan span, no
#           CPU time: one span per statement, no system call of its own)
#   full    as trace with track_planning = on, track_cpu_time = on: a plan
#           span, and two thread-CPU-clock system calls a span
#   export  as trace + otlp_endpoint = a local sink (bench/sink.py), 200 ms
#   fullexp as full + the same export
#   hz100   as trace + profile = traced, sample_hz 100, no export
#   hz250   as trace + profile = traced, sample_hz 250 (the highest rate)
#
# Runs are interleaved: every round runs every workload under every
# configuration (the order of configurations rotates from round to round),
# so machine noise hits all alike; ratios are taken within a round, and
# medians over rounds are reported.  Server CPU is utime+stime of every
# process of the cluster (/proc/<pid>/stat; the postmaster's cutime/cstime
# holds the backends that exited), divided by the transactions pgbench
# processed: steadier than TPS on a shared machine.
#
# Both clusters run with synchronous_commit = off (TPC-B would otherwise
# wait on WAL flushes and hide CPU costs), autovacuum off and no
# checkpoints during a round (VACUUM/CHECKPOINT run between rounds, outside
# the measurements); the queries of this script itself are not traced.
# When the rounds dropped spans, one more export run per workload on a
# third cluster with a larger traceprof.max_spans shows whether that helps.
#
# pairs: the comparisons the smallest targets are about (no extension vs
# loaded and idle, no extension vs tracing 100%, tracing vs tracing +
# sampler at 100 Hz), select-only, as
# PAIRS pairs of short runs back to back (PAIR_SECONDS each, the order
# alternating); the ratio of CPU per transaction is taken within each pair,
# so drifts of the shared machine slower than a pair cancel.  Prints the
# median ratio and a 95% confidence interval of that median (order
# statistics, no assumption about the noise's distribution).
#
# mixed: traced and untraced transactions in one pgbench run, each
# connection choosing between two scripts at random (the same statements,
# each with a sqlcommenter traceparent, sampled or not), so that a drift of
# the shared machine hits both alike; their mean latencies from pgbench's
# per-transaction log give what tracing adds to a transaction, with and
# without export, at 1 client (TPS ratio = 1 / latency ratio) and at the
# rounds' clients (TPS with every transaction traced estimated from the
# added time and the run's TPS).  MIXED_ROUNDS runs of MIXED_SECONDS each.
#
# concurrent: the target as written, against no extension, with both
# sides under the same drift: cluster A (no extension) and cluster B each
# driven by its own pgbench at the same time, CLIENTS/2 clients each, on
# the same CPUs; B loaded and idle, tracing every statement, or tracing
# with export to the local sink (its spans dropped are counted).  Cluster D
# (no extension, same settings and data) against A is the A/A control: its
# spread is the method's resolution.  Ratio = B's (or D's) TPS / A's TPS in
# the same run; CONCURRENT_ROUNDS rounds of CONCURRENT_SECONDS each, of
# CONCURRENT_WORKLOADS (select select_prepared tpcb, or some of them for
# more rounds; connect, select-only with a connection per transaction, is
# not in the default: it measures what starting and ending a backend costs);
# printed as the median over rounds, its 95% confidence interval and the
# range.  Each client runs as a pgbench of its own pinned to one CPU, its
# backend moved to the same CPU, so every CPU runs one client and backend
# of each cluster (CONCURRENT_PIN=0: one unpinned pgbench a cluster, where
# the scheduler's placement moved the A/A control's rounds by ±10%).  Two
# clusters of the same settings can differ by a few percent, so B also runs
# without its library (a restart, then a warm-up), and B's configurations
# are set against that too: the round's ratio over B's own bare ratio.
#
# Then two sections that machine noise does not touch:
# - frames: a hash join, a sort and a seq scan traced at 250 Hz on cluster
#   B; the share of frames in traceprof.profile() that carry a function
#   name (not [unknown]..., not <module>+0x<hex>), and with module+0x names;
# - instructions: callgrind on a single-user backend over cluster A's
#   tables: instructions per transaction without the extension, with
#   compute_query_id only, loaded idle, and tracing 100% (needs valgrind).
set -eu

cd "$(dirname "$0")/.."
secs=${SECONDS_PER_RUN:-5}
rounds=${ROUNDS:-5}
scale=${SCALE:-10}
clients=${CLIENTS:-4}
threads=${THREADS:-2}
# max_spans for the second look at export drops (needs a restart: a third
# cluster is started for it).
big_spans=${DROPCHECK_MAX_SPANS:-65536}
# Parts to run (all by default): tps (the pgbench rounds), pairs (paired
# short runs), mixed (traced and untraced in one run), concurrent (against
# no extension, both driven at once), frames (named frames
# in a profile), instructions (callgrind).
sections=${SECTIONS:-tps mixed concurrent pairs frames instructions}
pairs=${PAIRS:-30}
pair_secs=${PAIR_SECONDS:-2}
mixed_rounds=${MIXED_ROUNDS:-5}
mixed_secs=${MIXED_SECONDS:-10}
concurrent_rounds=${CONCURRENT_ROUNDS:-8}
concurrent_secs=${CONCURRENT_SECONDS:-10}
concurrent_workloads=${CONCURRENT_WORKLOADS:-select select_prepared tpcb}
concurrent_pin=${CONCURRENT_PIN:-1}
ncpus=$(nproc)
want() {
	case " $sections " in *" $1 "*) return 0 ;; esac
	return 1
}

. scripts/cluster.sh
. bench/awk_stats.sh
. bench/sink_quiet.sh
pgbench_bin=$PG_BIN/pgbench
if [ ! -x "$pgbench_bin" ]; then
	echo "bench/pgbench.sh: $pgbench_bin not found (Debian package postgresql-15)" >&2
	exit 1
fi
for lib in traceprof traceprof_exporter; do
	if [ ! -f "$("$PG_BIN/pg_config" --pkglibdir)/$lib.so" ]; then
		echo "bench/pgbench.sh: $lib.so not installed; run make install-extension" >&2
		exit 1
	fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/traceprof-bench-pgbench.XXXXXX")
sink_pid=
started_at=$(date +%s)

# Clusters A, B, C and D are kept with save_cluster / use_cluster (cluster.sh).
cleanup() {
	set +e
	cluster_stop
	for c in A B C D; do
		use_cluster "$c"
		cluster_stop
	done
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
	echo "bench/pgbench.sh: $*" >&2
}

# psql on the current cluster's app database, never traced itself.
sql() {
	PGOPTIONS="${SQL_OPTIONS:-}" PSQL_DB=app psql_app -At -q "$@"
}

# Wait until no client backend is left, so its CPU time is in cutime.
settle() {
	wait_no_clients
	sleep 0.2
}

start_cluster() {	# start_cluster NAME [conf lines...]
	name=$1
	shift
	cluster_start "shared_buffers = 256MB" "synchronous_commit = off" "autovacuum = off" \
		"checkpoint_timeout = 1h" "max_wal_size = 8GB" "$@" >/dev/null
	save_cluster "$name"
	as_postgres "$pgbench_bin" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -i -q -s "$scale" app \
		>"$dir/init.log" 2>&1 || { cat "$dir/init.log" >&2; exit 1; }
	sql -c "CREATE EXTENSION pg_prewarm"
	case " $* " in
	*traceprof*)
		sql -c "CREATE EXTENSION traceprof"
		;;
	esac
}

# The local OTLP sink.
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

say "starting two PostgreSQL 15 clusters (pgbench scale $scale)"
start_cluster A
start_cluster B "shared_preload_libraries = 'traceprof'"

configs="none idle trace full export fullexp hz100 hz250"
# label: workload name; flags: pgbench options
workloads="select select_prepared tpcb"
workload_flags() {
	case $1 in
	select) echo "-S" ;;
	select_prepared) echo "-S -M prepared" ;;
	tpcb) echo "" ;;
	connect) echo "-S -C" ;;	# a connection per transaction: what starting a backend costs
	esac
}

# Settings of configuration $1 on cluster B (sample_rate, profile, hz,
# endpoint, track_planning and track_cpu_time).
config_settings() {
	case $1 in
	idle) echo "0 traced 100 '' off" ;;
	trace) echo "1 off 100 '' off" ;;
	full) echo "1 off 100 '' on" ;;
	export) echo "1 off 100 '$sink_url' off" ;;
	fullexp) echo "1 off 100 '$sink_url' on" ;;
	hz100) echo "1 traced 100 '' off" ;;
	hz250) echo "1 traced 250 '' off" ;;
	mixed) echo "0 off 100 '' off" ;;
	mixedexp) echo "0 off 100 '$sink_url' off" ;;
	esac
}

applied=
apply_config() {
	[ "$1" = none ] && return
	[ "$1" = "$applied" ] && return
	# shellcheck disable=SC2046 # five words wanted
	set -- "$1" $(config_settings "$1")
	sql -c "ALTER SYSTEM SET traceprof.sample_rate = $2" \
		-c "ALTER SYSTEM SET traceprof.profile = $3" \
		-c "ALTER SYSTEM SET traceprof.sample_hz = $4" \
		-c "ALTER SYSTEM SET traceprof.otlp_endpoint = $5" \
		-c "ALTER SYSTEM SET traceprof.track_planning = $6" \
		-c "ALTER SYSTEM SET traceprof.track_cpu_time = $6" \
		-c "ALTER SYSTEM SET traceprof.export_interval = '200ms'" \
		-c "SELECT pg_reload_conf()" >/dev/null
	# A fresh session must see the new values before pgbench starts.
	want="$2|$3|$4|$(echo "$5" | tr -d "'")|$6"
	try=0
	while :; do
		got=$(SQL_OPTIONS='' sql -c "SELECT current_setting('traceprof.sample_rate') || '|' || current_setting('traceprof.profile') || '|' || current_setting('traceprof.sample_hz') || '|' || current_setting('traceprof.otlp_endpoint') || '|' || current_setting('traceprof.track_cpu_time')")
		[ "$got" = "$want" ] && break
		try=$((try + 1))
		[ "$try" -lt 50 ] || { say "configuration $1 not applied (got $got, want $want)"; exit 1; }
		sleep 0.1
	done
	sleep 0.3	# let the exporter see its new endpoint
	applied=$1
}

# Counters of traceprof.stats as one line.
stats_line() {
	sql -F' ' -c "SELECT spans_created, spans_dropped, spans_exported, export_failures, samples_stored, samples_dropped, spans_pending FROM traceprof.stats"
}

# The current cluster's exporter done with what the last export run
# queued, so that it does not send during the next run (at most 60 s).
exporter_drained() {
	for _ in $(seq 1 600); do
		[ "$(stats_line | cut -d' ' -f7)" = 0 ] && return
		sleep 0.1
	done
	say "the exporter still had spans to export after 60 s"
}

# Between rounds, on both clusters: the same state for TPC-B each round.
maintain() {
	for c in A B; do
		use_cluster "$c"
		SQL_OPTIONS=$( [ "$c" = B ] && echo "-c traceprof.sample_rate=0" ) sql \
			-c "TRUNCATE pgbench_history" -c "VACUUM" -c "CHECKPOINT"
	done
}

# run_pgbench WHAT OPTIONS...: pgbench on the current cluster's app
# database, its output in $dir/pgbench.out; a failure ends the benchmark.
run_pgbench() {
	what=$1
	shift
	as_postgres "$pgbench_bin" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -n "$@" app \
		>"$dir/pgbench.out" 2>&1 || {
		say "pgbench failed ($what)"
		cat "$dir/pgbench.out" >&2
		exit 1
	}
}

# tps_of FILE: the TPS a pgbench output reports (summed, when the file
# holds the outputs of several pgbench processes run at once).
tps_of() {
	sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1" | awk '{ t += $1 } END { print t }'
}

# tx_of FILE: the transactions a pgbench output reports (summed likewise).
tx_of() {
	sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1" | awk '{ t += $1 } END { print t }'
}

# run_one ROUND WORKLOAD CONFIG [TAG]: one pgbench run; appends a line to
# $dir/results: tag round workload config tps transactions cpu_ticks
# created dropped exported failures samples samples_dropped sink_ticks sink_requests
run_one() {
	round=$1 wl=$2 cfg=$3 tag=${4:-main}
	if [ "$cfg" = none ]; then
		use_cluster A
		SQL_OPTIONS=
	else
		[ "$tag" = big ] || use_cluster B
		SQL_OPTIONS="-c traceprof.sample_rate=0"
		apply_config "$cfg"
	fi
	if [ "$wl" = tpcb ]; then
		sql -c "TRUNCATE pgbench_history" -c "VACUUM pgbench_branches, pgbench_tellers"
	fi
	settle
	stats0="0 0 0 0 0 0 0"
	[ "$cfg" = none ] || stats0=$(stats_line)
	sink0=$(pid_ticks "$sink_pid")
	req0=$(curl -s "$sink_url/stats" | cut -d' ' -f1)
	ticks0=$(server_ticks)
	# shellcheck disable=SC2046 # pgbench options are several words
	run_pgbench "$wl, $cfg" -c "$clients" -j "$threads" -T "$secs" $(workload_flags "$wl")
	# The spans of this run are exported before the CPU is read (no
	# session asks: see bench/sink_quiet.sh).
	if [ "$cfg" = export ] || [ "$cfg" = fullexp ]; then
		sink_quiet "$sink_url" || say "  ($wl, $cfg: its CPU may miss the exporter's last requests)"
	fi
	settle
	ticks1=$(server_ticks)
	sink1=$(pid_ticks "$sink_pid")
	req1=$(curl -s "$sink_url/stats" | cut -d' ' -f1)
	stats1="0 0 0 0 0 0 0"
	[ "$cfg" = none ] || stats1=$(stats_line)
	pending=$(echo "$stats1" | cut -d' ' -f7)
	if [ "$pending" != 0 ]; then
		say "  ($wl, $cfg: $pending spans still to export when the sink went quiet; their CPU is not in this run)"
		exporter_drained
	fi
	tps=$(tps_of "$dir/pgbench.out")
	tx=$(tx_of "$dir/pgbench.out")
	echo "$tag $round $wl $cfg $tps $tx $((ticks1 - ticks0)) $stats0 $stats1 $((sink1 - sink0)) $((req1 - req0))" |
		awk '{ printf "%s %s %s %s %s %s %s", $1, $2, $3, $4, $5, $6, $7
			for (i = 0; i < 6; i++) printf " %d", $(15 + i) - $(8 + i)
			printf " %s %s\n", $22, $23 }' >>"$dir/results"
	printf '  round %d  %-16s %-7s %10.0f tps %8.1f us/tx\n' "$round" "$wl" "$cfg" "$tps" \
		"$(awk -v t="$((ticks1 - ticks0))" -v n="$tx" -v hz="$(getconf CLK_TCK)" 'BEGIN { print t / hz * 1e6 / n }')" >&2
}

# What a span's clock reads cost here: traceprof.track_cpu_time's price.
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -o "$dir/clock_cost" bench/clock_cost.c
# shellcheck disable=SC2046 # two numbers wanted
set -- $("$dir/clock_cost" 200000)
echo "clock reads on this machine: thread CPU clock $1 ns (a system call; traceprof.track_cpu_time), wall clock $2 ns (vDSO)"
[ -n "${BENCH_SUMMARY:-}" ] &&
	echo "pgbench|one read of the thread CPU clock / of the wall clock (ns)|$1 / $2|" >>"$BENCH_SUMMARY"

if want tps; then
nconfigs=$(echo "$configs" | wc -w)
total_runs=$((rounds * nconfigs * 3))
say "$rounds rounds x 3 workloads x $nconfigs configurations = $total_runs runs of $secs s ($clients clients, $threads threads)"
round=0
while [ "$round" -lt "$rounds" ]; do
	maintain
	for wl in $workloads; do
		# Rotate the order of configurations from round to round.
		order=$(echo "$configs" | awk -v r="$round" '{ for (i = 0; i < NF; i++) printf "%s ", $(((i + r) % NF) + 1) }')
		for cfg in $order; do
			run_one "$round" "$wl" "$cfg"
		done
	done
	round=$((round + 1))
done

# Export drops with a larger span ring: a third cluster (max_spans needs a
# restart), once per workload, only when the rounds dropped spans.
dropped_main=$(awk '$1 == "main" && $4 ~ /exp/ { d += $9 } END { print d + 0 }' "$dir/results")
if [ "$dropped_main" -gt 0 ]; then
	say "spans were dropped with the default max_spans: one more export run per workload with max_spans = $big_spans"
	use_cluster B
	SQL_OPTIONS="-c traceprof.sample_rate=0"
	sql -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
	start_cluster C "shared_preload_libraries = 'traceprof'" "traceprof.max_spans = $big_spans"
	applied=
	for wl in $workloads; do
		run_one 0 "$wl" export big
	done
	cluster_stop
	# shellcheck disable=SC2034 # read through use_cluster's eval
	C_PID='' C_DIR=''
fi

use_cluster B
server_version=$(sql -c "SHOW server_version" | cut -d' ' -f1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain -- extension common sql 2>/dev/null | head -n 1)
[ -n "$dirty" ] && commit="$commit (+ uncommitted changes in extension/common/sql)"

awk -v rounds="$rounds" -v secs="$secs" -v clients="$clients" -v threads="$threads" \
	-v scale="$scale" -v ver="$server_version" -v cpus="$(nproc)" -v hz="$(getconf CLK_TCK)" \
	-v commit="$commit" -v big="$big_spans" -v workloads="$workloads" -v configs="$configs" \
	-v summary="${BENCH_SUMMARY:-}" "$AWK_STATS"'
	function minmax(list, count,    i, lo, hi) {
		lo = list[1]; hi = list[1]
		for (i = 2; i <= count; i++) { if (list[i] < lo) lo = list[i]; if (list[i] > hi) hi = list[i] }
		return sprintf("%.3f..%.3f", lo, hi)
	}
	$1 == "main" {
		k = $3 SUBSEP $4 SUBSEP $2
		tps[k] = $5; tx[k] = $6; us[k] = $7 / hz * 1e6 / $6
		created[$3, $4] += $8; dropped[$3, $4] += $9; exported[$3, $4] += $10; failures[$3, $4] += $11
		samples[$3, $4] += $12; sdropped[$3, $4] += $13; sink[$3, $4] += $14 / hz * 1e6 / $6
		requests[$3, $4] += $15; txs[$3, $4] += $6
	}
	$1 == "big" {
		btps[$3] = $5; btx[$3] = $6; bus[$3] = $7 / hz * 1e6 / $6; bcreated[$3] = $8
		bdropped[$3] = $9; bexported[$3] = $10; bfail[$3] = $11; have_big = 1
	}
	END {
		nw = split(workloads, wls, " "); nc = split(configs, cfs, " ")
		name["select"] = "pgbench -S (select-only, simple protocol)"
		name["select_prepared"] = "pgbench -S -M prepared (select-only, prepared)"
		name["tpcb"] = "pgbench (TPC-B-like, simple protocol)"
		label["none"] = "no extension"; label["idle"] = "loaded, idle"
		label["trace"] = "tracing 100%"; label["export"] = "tracing 100% + OTLP export"
		label["full"] = "tracing, full detail"; label["fullexp"] = "tracing, full + OTLP export"
		label["hz100"] = "tracing + sampler 100 Hz"; label["hz250"] = "tracing + sampler 250 Hz"
		printf "\npgbench: PostgreSQL %s, %d CPUs, scale %d, %d clients / %d threads, %d s per run,\n", ver, cpus, scale, clients, threads, secs
		printf "%d rounds interleaved (medians; ratios taken within a round), traceprof %s\n", rounds, commit
		for (w = 1; w <= nw; w++) {
			wl = wls[w]
			printf "\n%s\n", name[wl]
			printf "%-28s %9s %10s %13s %9s %10s %13s  %s\n", "configuration", "TPS", "TPS ratio",
				"ratio range", "CPU us/tx", "CPU ratio", "CPU vs trace", "target"
			for (c = 1; c <= nc; c++) {
				cf = cfs[c]
				for (r = 0; r < rounds; r++) {
					t[r + 1] = tps[wl, cf, r]; u[r + 1] = us[wl, cf, r]
					tr[r + 1] = tps[wl, cf, r] / tps[wl, "none", r]
					ur[r + 1] = us[wl, cf, r] / us[wl, "none", r]
					vt[r + 1] = us[wl, cf, r] / us[wl, "trace", r]
				}
				mt = median(t, rounds); mu = median(u, rounds); mtr = median(tr, rounds)
				mur = median(ur, rounds); mvt = median(vt, rounds); range = minmax(tr, rounds)
				target = ""
				if (cf == "idle") target = sprintf("TPS >= 0.99x: %s", mtr >= 0.99 ? "met" : "NOT met")
				if (cf == "trace") target = sprintf("TPS >= 0.97x: %s", mtr >= 0.97 ? "met" : "NOT met")
				if (cf == "export") target = sprintf("TPS >= 0.95x, 0 dropped: %s (%d dropped)",
					(mtr >= 0.95 && dropped[wl, cf] == 0) ? "met" : "NOT met", dropped[wl, cf])
				if (cf == "hz100") target = sprintf("CPU <= 1.01x tracing: %s", mvt <= 1.01 ? "met" : "NOT met")
				if (cf == "none")
					printf "%-28s %9.0f %10s %13s %9.1f %10s %13s  %s\n", label[cf], mt, "1.000", "-", mu, "1.000", "-", target
				else if (cf == "idle")
					printf "%-28s %9.0f %10.3f %13s %9.1f %10.3f %13s  %s\n", label[cf], mt, mtr, range, mu, mur, "-", target
				else
					printf "%-28s %9.0f %10.3f %13s %9.1f %10.3f %13.3f  %s\n", label[cf], mt, mtr, range, mu, mur, mvt, target
				if (summary != "" && cf != "none")
					printf "pgbench|%s, %s: TPS / CPU-per-tx ratio to no extension%s|%.3fx / %.3fx%s|%s\n",
						wl, label[cf], cf ~ /^hz/ ? " (CPU vs tracing)" : "", mtr, mur,
						cf ~ /^hz/ ? sprintf(" (%.3fx)", mvt) : "", target >>summary
			}
		}
		printf "\ntraceprof.stats per run (means over %d rounds)\n", rounds
		printf "%-16s %-7s %11s %9s %13s %12s %10s %11s %9s %15s\n", "workload", "config", "transactions",
			"spans/tx", "spans dropped", "exported", "failures", "samples", "smp drop", "sink CPU us/tx"
		for (w = 1; w <= nw; w++) for (c = 2; c <= nc; c++) {
			wl = wls[w]; cf = cfs[c]
			printf "%-16s %-7s %11.0f %9.2f %13.0f %12.0f %10.0f %11.0f %9.0f %15s\n", wl, cf, txs[wl, cf] / rounds,
				txs[wl, cf] ? (created[wl, cf] + dropped[wl, cf]) / txs[wl, cf] : 0,
				dropped[wl, cf] / rounds, exported[wl, cf] / rounds, failures[wl, cf] / rounds,
				samples[wl, cf] / rounds, sdropped[wl, cf] / rounds,
				cf ~ /exp/ ? sprintf("%.1f", sink[wl, cf] / rounds) : "-"
		}
		if (have_big) {
			printf "\nexport with traceprof.max_spans = %d (a third cluster, one run per workload)\n", big
			printf "%-16s %9s %9s %13s %12s %10s\n", "workload", "TPS", "CPU us/tx", "spans dropped", "exported", "failures"
			for (w = 1; w <= nw; w++) {
				wl = wls[w]
				printf "%-16s %9.0f %9.1f %13d %12d %10d\n", wl, btps[wl], bus[wl], bdropped[wl], bexported[wl], bfail[wl]
			}
		}
	}' "$dir/results"
echo "TPS ratio, CPU ratio: to the same round's no-extension run; CPU vs trace: CPU us/tx to the same round's tracing-only run."
echo "tracing: the defaults (one span per statement, no CPU-clock system calls); full detail: traceprof.track_planning = on and traceprof.track_cpu_time = on."
echo "Server CPU: utime+stime of all processes of the cluster (exporter included); the sink's own CPU is shown apart."
fi

# ---------------------------------------------------------------------------
# Traced and untraced transactions mixed in one run (see the header).
if want mixed; then
	say "mixed: $mixed_rounds rounds of $mixed_secs s, traced and untraced scripts at random, 3 workloads x 2 configurations x 1 and $clients clients"
	context=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7
	mkdir -p "$dir/mixed"
	# mixed_script WORKLOAD FLAGS: pgbench's own transaction, every statement
	# carrying the traceparent with flags FLAGS (01 sampled, 00 not).
	mixed_script() {
		c="/*traceparent='$context-$2'*/"
		printf '\\set aid random(1, 100000 * %d)\n' "$scale"
		if [ "$1" = tpcb ]; then
			printf '\\set bid random(1, %d)\n\\set tid random(1, 10 * %d)\n' "$scale" "$scale"
			printf '\\set delta random(-5000, 5000)\n'
			echo "BEGIN $c;"
			echo "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid $c;"
			echo "SELECT abalance FROM pgbench_accounts WHERE aid = :aid $c;"
			echo "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid $c;"
			echo "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid $c;"
			echo "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP) $c;"
			echo "END $c;"
		else
			echo "SELECT abalance FROM pgbench_accounts WHERE aid = :aid $c;"
		fi
	}
	for wl in select tpcb; do
		mixed_script "$wl" 01 >"$dir/mixed/$wl-traced.sql"
		mixed_script "$wl" 00 >"$dir/mixed/$wl-untraced.sql"
	done
	chmod 755 "$dir" "$dir/mixed"
	chmod 644 "$dir"/mixed/*.sql
	[ "$(id -u)" = 0 ] && chown postgres: "$dir/mixed"
	use_cluster B
	SQL_OPTIONS="-c traceprof.sample_rate=0"
	applied=
	r=0
	while [ "$r" -lt "$mixed_rounds" ]; do
		for wl in select select_prepared tpcb; do
			script=${wl%_prepared}
			for cfg in mixed mixedexp; do
				apply_config "$cfg"
				for nc in 1 "$clients"; do
					[ "$script" = tpcb ] && sql -c "TRUNCATE pgbench_history" -c "VACUUM pgbench_branches, pgbench_tellers"
					settle
					rm -f "$dir"/mixed/log.*
					stats0=$(stats_line)
					# shellcheck disable=SC2046 # pgbench options are several words
					run_pgbench "mixed $wl" -c "$nc" -j "$( [ "$nc" = 1 ] && echo 1 || echo "$threads" )" \
						-T "$mixed_secs" $( [ "$wl" = select_prepared ] && echo "-M prepared" ) \
						-l --log-prefix="$dir/mixed/log" \
						-f "$dir/mixed/$script-traced.sql@1" -f "$dir/mixed/$script-untraced.sql@1"
					stats1=$(stats_line)
					# Log lines: client, transaction, latency (us), script (0: traced), ...
					awk -v r="$r" -v wl="$wl" -v cfg="$cfg" -v nc="$nc" -v secs="$mixed_secs" -v s0="$stats0" -v s1="$stats1" '
						{ n[$4]++; us[$4] += $3 }
						END {
							split(s0, a, " "); split(s1, b, " ")
							printf "mixed %s %s %s %d %.3f %d %.3f %d %d %.1f\n", r, wl, cfg, n[0], us[0] / n[0],
								n[1], us[1] / n[1], b[2] - a[2], nc, (n[0] + n[1]) / secs
						}' "$dir"/mixed/log.* >>"$dir/results"
					tail -n 1 "$dir/results" | awk '{ printf "  round %d  %-16s %-9s %d client(s)  traced %8.2f us  untraced %8.2f us  ratio %.4f\n", $2, $3, $4, $10, $6, $8, $6 / $8 }' >&2
				done
			done
		done
		r=$((r + 1))
	done
	echo
	echo "mixed runs: traced and untraced transactions at random in one pgbench run ($mixed_rounds rounds of ${mixed_secs} s),"
	echo "mean latency of each from pgbench's transaction log; medians over rounds (range)"
	awk -v summary="${BENCH_SUMMARY:-}" -v cpus="$(nproc)" -v clients="$clients" "$AWK_STATS"'
		$1 == "mixed" {
			k = $3 SUBSEP $4 SUBSEP $10; i = ++count[k]
			ratio[k, i] = $6 / $8; added[k, i] = $6 - $8; tps[k, i] = $11
			# Every transaction traced, all CPUs busy: each costs added us more of cpus x 1 s.
			eqv[k, i] = 1 / (1 + ($6 - $8) * $11 / (cpus * 1e6))
			dropped[k] += $9
		}
		END {
			name["select"] = "select-only"; name["select_prepared"] = "select-only, prepared"; name["tpcb"] = "TPC-B-like"
			label["mixed"] = "tracing"; label["mixedexp"] = "tracing + OTLP export"
			printf "%-22s %-22s %7s %9s %9s %17s %9s %11s %8s\n", "workload", "configuration", "clients",
				"TPS", "ratio", "ratio range", "added us", "TPS eqv", "dropped"
			split("select select_prepared tpcb", w, " "); split("mixed mixedexp", c, " "); split("1 " clients, ncs, " ")
			for (i = 1; i <= 3; i++) for (j = 1; j <= 2; j++) for (h = 1; h <= 2; h++) {
				k = w[i] SUBSEP c[j] SUBSEP ncs[h]; m = count[k]
				if (m == 0) continue
				for (x = 1; x <= m; x++) { q[x] = ratio[k, x]; d[x] = added[k, x]; t[x] = tps[k, x]; e[x] = eqv[k, x] }
				md = median(d, m); mt = median(t, m); sort(q, m); mr = median(q, m)
				# 1 client: TPS is 1 / latency; more: the estimate above.
				te = ncs[h] == 1 ? 1 / mr : median(e, m)
				target = c[j] == "mixed" ? 0.97 : 0.95
				printf "%-22s %-22s %7d %9.0f %9.4f %8.4f..%-8.4f %9.2f %11.4f %8d  TPS >= %.2fx: %s\n", name[w[i]], label[c[j]],
					ncs[h], mt, mr, q[1], q[m], md, te, dropped[k], target,
					(te >= target && dropped[k] == 0) ? "met" : "NOT met"
				if (summary != "")
					printf "pgbench|mixed runs, %s, %s, %d client(s): traced / untraced latency, median (range); TPS all traced|%.4fx (%.4f..%.4f), %.4fx|TPS >= %.2fx\n",
						name[w[i]], label[c[j]], ncs[h], mr, q[1], q[m], te, target >>summary
			}
		}' "$dir/results"
	echo "ratio: traced / untraced mean latency within a run; added: traced - untraced (us); dropped: spans the ring dropped"
	echo "TPS eqv, TPS with every transaction traced: 1 / ratio with 1 client (TPS is 1 / latency); with $clients clients,"
	echo "  1 / (1 + added x TPS / (CPUs x 1 s)): each traced transaction takes 'added' more of the busy CPUs (an estimate)"
	echo "both scripts carry the same sqlcommenter comment (flags 01 / 00), so reading it is paid by both"
	SQL_OPTIONS="-c traceprof.sample_rate=0"
	sql -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
	applied=
fi

# ---------------------------------------------------------------------------
# Paired short runs: baseline and candidate back to back, the order
# alternating, select-only; ratios within each pair.
# Cluster A and another driven at once (see the header).
if want concurrent; then
	say "concurrent: $concurrent_rounds rounds of $concurrent_secs s, no extension vs A/A, B without its library, idle, tracing, tracing + export, workloads: $concurrent_workloads, both driven at once"
	start_cluster D
	half=$(( (clients + 1) / 2 ))
	# restart_b LIBRARIES WORKLOAD: cluster B restarted with
	# shared_preload_libraries = LIBRARIES, its empty buffers warmed up.
	restart_b() {
		use_cluster B
		cluster_halt
		cluster_launch -c "shared_preload_libraries=$1" || { say "cluster B did not restart"; exit 1; }
		save_cluster B
		# shellcheck disable=SC2046 # pgbench options are several words
		as_postgres "$pgbench_bin" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -n \
			-c "$half" -j "$half" -T 3 $(workload_flags "$2") app >/dev/null 2>&1 ||
			{ say "warm-up of cluster B failed"; exit 1; }
		prepare B
	}
	# pgbench_bg CLUSTER WORKLOAD OUT: the cluster's pgbench in the
	# background, its outputs in OUT.*, its processes added to bg_pids.
	# Pinned: one pgbench of one client per CPU, each on its CPU, its
	# backend moved there once connected (pin_backends, cluster.sh).
	pgbench_bg() {
		use_cluster "$1"
		if [ "$concurrent_pin" = 1 ]; then
			n=0
			while [ "$n" -lt "$half" ]; do
				# shellcheck disable=SC2046 # pgbench options are several words
				as_postgres env PGAPPNAME="bench_cpu$((n % ncpus))" taskset -c "$((n % ncpus))" \
					"$pgbench_bin" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -n \
					-c 1 -j 1 -T "$concurrent_secs" $(workload_flags "$2") app >"$3.$n" 2>&1 &
				bg_pids="$bg_pids $!"
				n=$((n + 1))
			done
		else
			# shellcheck disable=SC2046 # pgbench options are several words
			as_postgres "$pgbench_bin" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -n \
				-c "$half" -j "$half" -T "$concurrent_secs" $(workload_flags "$2") app >"$3.0" 2>&1 &
			bg_pids="$bg_pids $!"
		fi
	}
	# prepare CLUSTER: the same starting point whatever ran before: no dead
	# rows left by the last TPC-B runs (the next reads would prune them),
	# and the tables in shared buffers (a restart empties them).
	prepare() {
		use_cluster "$1"
		SQL_OPTIONS="-c traceprof.sample_rate=0" sql -c "VACUUM pgbench_accounts, pgbench_branches, pgbench_tellers" \
			-c "SELECT sum(pg_prewarm(c)) FROM unnest('{pgbench_accounts,pgbench_accounts_pkey,pgbench_branches,pgbench_tellers}'::regclass[]) c" >/dev/null
	}
	# settle_both OTHER: no client backend left on A nor OTHER, so that
	# their CPU is in the postmasters' cutime.
	settle_both() {
		use_cluster A
		settle
		use_cluster "$1"
		settle
	}
	ticks_of() {
		use_cluster "$1"
		server_ticks
	}
	# us_per_tx TICKS PGBENCH_OUTPUT
	us_per_tx() {
		awk -v t="$1" -v n="$(tx_of "$2")" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }'
	}
	r=0
	while [ "$r" -lt "$concurrent_rounds" ]; do
		for wl in $concurrent_workloads; do
			# Each workload starts alike: before this, the first pair of a
			# workload paid for the other workload's leftovers (a restart's
			# empty buffers, unpruned rows, the exporter still sending), so
			# the configuration that came first lost up to a quarter.
			for c in A B D; do prepare "$c"; done
			# The order of the five pairs rotates from round to round.
			for i in 0 1 2 3 4; do
				case $(( (i + r) % 5 )) in
				0) other=D cfg=aa ;;
				1) other=B cfg=idle ;;
				2) other=B cfg=trace ;;
				3) other=B cfg=export ;;
				4) other=B cfg=bare ;;
				esac
				[ "$cfg" != bare ] || restart_b '' "$wl"
				if [ "$other" = B ] && [ "$cfg" != bare ]; then
					use_cluster B
					SQL_OPTIONS="-c traceprof.sample_rate=0"
					apply_config "$cfg"
				fi
				for c in A "$other"; do
					use_cluster "$c"
					SQL_OPTIONS=$( [ "$c" = B ] && echo "-c traceprof.sample_rate=0" ) sql \
						-c "TRUNCATE pgbench_history" -c "VACUUM pgbench_branches, pgbench_tellers"
				done
				dropped0=0
				[ "$cfg" != export ] || dropped0=$(stats_line | cut -d' ' -f2)
				settle_both "$other"
				ticks_a0=$(ticks_of A) ticks_b0=$(ticks_of "$other")
				rm -f "$dir"/concurrent.[ab]*
				bg_pids=
				pgbench_bg A "$wl" "$dir/concurrent.a"
				pgbench_bg "$other" "$wl" "$dir/concurrent.b"
				# A backend per transaction (connect) runs where the postmaster may.
				if [ "$concurrent_pin" = 1 ] && [ "$wl" != connect ]; then
					use_cluster A
					pin_backends "$half" || exit 1
					use_cluster "$other"
					pin_backends "$half" || exit 1
				fi
				failed=0
				for pid in $bg_pids; do
					wait "$pid" || failed=1
				done
				cat "$dir"/concurrent.a.* >"$dir/concurrent.a"
				cat "$dir"/concurrent.b.* >"$dir/concurrent.b"
				if [ "$failed" = 1 ]; then
					say "pgbench failed (concurrent $wl, $cfg)"
					cat "$dir/concurrent.a" "$dir/concurrent.b" >&2
					exit 1
				fi
				# The exporter's CPU for this run's spans is B's too: read once
				# it sent them, and before any session asks B how it went.
				[ "$cfg" != export ] || sink_quiet "$sink_url" || say "  (round $r: its CPU may miss the exporter's last requests)"
				settle_both "$other"
				ticks_a=$(( $(ticks_of A) - ticks_a0 )) ticks_b=$(( $(ticks_of "$other") - ticks_b0 ))
				dropped=0
				if [ "$cfg" = export ]; then
					use_cluster B
					SQL_OPTIONS="-c traceprof.sample_rate=0"
					line=$(stats_line)
					dropped=$(( $(echo "$line" | cut -d' ' -f2) - dropped0 ))
					pending=$(echo "$line" | cut -d' ' -f7)
					if [ "$pending" != 0 ]; then
						say "  round $r: B's exporter had $pending spans left when the sink went quiet; its CPU for them is not in this round"
						exporter_drained
					fi
				fi
				echo "concurrent $r $wl $cfg $(tps_of "$dir/concurrent.a") $(tps_of "$dir/concurrent.b") $dropped" \
					"$(tx_of "$dir/concurrent.a") $ticks_a $(tx_of "$dir/concurrent.b") $ticks_b" >>"$dir/results"
				say "  round $r  $wl  $cfg  $(tps_of "$dir/concurrent.a") / $(tps_of "$dir/concurrent.b") TPS," \
					"$(us_per_tx "$ticks_a" "$dir/concurrent.a") / $(us_per_tx "$ticks_b" "$dir/concurrent.b") server CPU us/tx$([ "$cfg" != export ] || echo ", $dropped spans dropped")"
				[ "$cfg" != bare ] || restart_b traceprof "$wl"
			done
		done
		r=$((r + 1))
	done
	echo
	echo "concurrent runs: cluster A (no extension) and another driven at once, $half client(s) each, same CPUs$([ "$concurrent_pin" != 1 ] || echo ", each client and its backend pinned to one") ($concurrent_rounds rounds of ${concurrent_secs} s)"
	echo "TPS ratio = the other's TPS / A's TPS in the same run; CPU ratio = the other's server CPU per transaction / A's"
	echo "(every process of the cluster, exporter included: what a transaction cost, whatever share of the CPUs each"
	echo "cluster got). Median over rounds, its 95% confidence interval (order statistics), range"
	awk -v summary="${BENCH_SUMMARY:-}" "$AWK_STATS"'
		$1 == "concurrent" {
			k = $3 SUBSEP $4; dropped[k] += $7; rounds = $2 + 1
			of_round["tps", k, $2] = $6 / $5
			if (NF >= 11 && $8 > 0 && $10 > 0 && $9 > 0)
				of_round["cpu", k, $2] = ($11 / $10) / ($9 / $8)
		}
		# table(METRIC, UNIT): against A, then against B without its library
		# (the ratio of each round over the bare ratio of that round).
		function table(metric, unit,    i, j, k, bare, m, r, lo) {
			printf "\n%-22s %-26s %6s %9s %19s %19s\n", "workload", unit " against no extension", "rounds", "ratio", "95% CI", "range"
			for (i = 1; i <= nw; i++) for (j = 1; j <= 5; j++) {
				k = w[i] SUBSEP c[j]; m = 0
				for (r = 0; r < rounds; r++)
					if ((metric, k, r) in of_round)
						q[++m] = of_round[metric, k, r]
				if (m == 0) continue
				sort(q, m)
				lo = ci_rank(m)
				printf "%-22s %-26s %6d %9.4f %9.4f..%-9.4f %9.4f..%-9.4f %s%s\n", name[w[i]], label[c[j]], m, median(q, m),
					q[lo], q[m - lo + 1], q[1], q[m], target[metric, c[j]],
					c[j] == "export" ? sprintf(" (spans dropped: %d)", dropped[k]) : ""
				if (summary != "")
					printf "pgbench|concurrent runs, %s, %s: %s ratio to no extension, median (range)|%.4fx (%.4f..%.4f)|%s\n",
						name[w[i]], label[c[j]], unit, median(q, m), q[1], q[m], target[metric, c[j]] >>summary
			}
			printf "\n%-22s %-26s %6s %9s %19s %19s\n", "workload", unit " against B bare", "rounds", "ratio", "95% CI", "range"
			for (i = 1; i <= nw; i++) for (j = 3; j <= 5; j++) {
				k = w[i] SUBSEP c[j]; bare = w[i] SUBSEP "bare"; m = 0
				for (r = 0; r < rounds; r++)
					if (((metric, k, r) in of_round) && ((metric, bare, r) in of_round))
						q[++m] = of_round[metric, k, r] / of_round[metric, bare, r]
				if (m == 0) continue
				sort(q, m)
				lo = ci_rank(m)
				printf "%-22s %-26s %6d %9.4f %9.4f..%-9.4f %9.4f..%-9.4f %s\n", name[w[i]], label[c[j]], m, median(q, m),
					q[lo], q[m - lo + 1], q[1], q[m], target[metric, c[j]]
				if (summary != "")
					printf "pgbench|concurrent runs, %s, %s: %s ratio to cluster B without its library, median (range)|%.4fx (%.4f..%.4f)|%s\n",
						name[w[i]], label[c[j]], unit, median(q, m), q[1], q[m], target[metric, c[j]] >>summary
			}
		}
		END {
			name["select"] = "select-only"; name["select_prepared"] = "select-only, prepared"; name["tpcb"] = "TPC-B-like"
			name["connect"] = "select-only, -C"
			label["aa"] = "A/A: no extension again"; label["idle"] = "loaded, idle"; label["trace"] = "tracing 100%"
			label["export"] = "tracing 100% + export"; label["bare"] = "B without its library"
			target["tps", "idle"] = "TPS >= 0.99x"; target["tps", "trace"] = "TPS >= 0.97x"
			target["tps", "export"] = "TPS >= 0.95x, 0 dropped"
			# The TPS targets as CPU per transaction, on CPUs kept busy.
			target["cpu", "idle"] = "<= 1.010x (TPS 0.99x)"; target["cpu", "trace"] = "<= 1.031x (TPS 0.97x)"
			target["cpu", "export"] = "<= 1.053x (TPS 0.95x)"
			target["tps", "aa"] = target["cpu", "aa"] = "1 (resolution)"
			target["tps", "bare"] = target["cpu", "bare"] = "B against A"
			nw = split("select select_prepared tpcb connect", w, " "); split("aa bare idle trace export", c, " ")
			table("tps", "TPS")
			table("cpu", "CPU/tx")
		}' "$dir/results"
	echo "read a ratio against the A/A row's spread: this host's noise, not the extension's"
	use_cluster B
	SQL_OPTIONS="-c traceprof.sample_rate=0"
	sql -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
	applied=
fi

if want pairs; then
	say "pairs: $pairs pairs of $pair_secs-second select-only runs for each of three comparisons"
	saved_secs=$secs
	secs=$pair_secs
	for comparison in "none idle" "none trace" "trace hz100"; do
		# shellcheck disable=SC2086 # two words wanted
		set -- $comparison
		i=0
		while [ "$i" -lt "$pairs" ]; do
			if [ $((i % 2)) = 0 ]; then
				run_one "$i" select "$1" "pair_$1_$2"
				run_one "$i" select "$2" "pair_$1_$2"
			else
				run_one "$i" select "$2" "pair_$1_$2"
				run_one "$i" select "$1" "pair_$1_$2"
			fi
			i=$((i + 1))
		done
	done
	secs=$saved_secs
	echo
	echo "paired runs, select-only: $pairs pairs of ${pair_secs}-second runs per comparison, the order alternating;"
	echo "ratio = candidate / baseline within each pair; median and its 95% confidence interval (order statistics)"
	awk -v hz="$(getconf CLK_TCK)" -v summary="${BENCH_SUMMARY:-}" "$AWK_STATS"'
		$1 ~ /^pair_/ {
			split($1, parts, "_"); base = parts[2]; cand = parts[3]
			us = $7 / hz * 1e6 / $6
			if ($4 == base) { base_us[$1, $2] = us; base_tps[$1, $2] = $5 }
			else { cand_us[$1, $2] = us; cand_tps[$1, $2] = $5 }
			n[$1] = $2 + 1
		}
		END {
			printf "%-28s %6s %12s %22s %12s %22s\n", "comparison", "pairs", "CPU ratio", "95% CI", "TPS ratio", "95% CI"
			ncomparisons = split("pair_none_idle pair_none_trace pair_trace_hz100", names, " ")
			target["pair_none_idle"] = "TPS >= 0.99x"; target["pair_none_trace"] = "TPS >= 0.97x"
			target["pair_trace_hz100"] = "CPU <= 1.01x"
			label["pair_none_trace"] = "tracing 100% / no extension"
			label["pair_none_idle"] = "loaded, idle / no extension"
			label["pair_trace_hz100"] = "sampler 100 Hz / tracing"
			for (c = 1; c <= ncomparisons; c++) {
				name = names[c]; count = n[name]
				if (count == 0) continue
				for (i = 0; i < count; i++) {
					cpu[i + 1] = cand_us[name, i] / base_us[name, i]
					tpsr[i + 1] = cand_tps[name, i] / base_tps[name, i]
				}
				sort(cpu, count); sort(tpsr, count)
				k = ci_rank(count)
				printf "%-28s %6d %12.4f %10.4f..%-10.4f %12.4f %10.4f..%-10.4f\n", label[name], count,
					median(cpu, count), cpu[k], cpu[count - k + 1], median(tpsr, count), tpsr[k], tpsr[count - k + 1]
				if (summary != "")
					printf "pgbench|paired select-only, %s: CPU / TPS ratio, median [95%% CI] (%d pairs)|%.3fx [%.3f..%.3f] / %.3fx [%.3f..%.3f]|%s\n",
						label[name], count, median(cpu, count), cpu[k], cpu[count - k + 1],
						median(tpsr, count), tpsr[k], tpsr[count - k + 1], target[name] >>summary
			}
		}' "$dir/results"
fi

# ---------------------------------------------------------------------------
# Named frames in a server profile: hash join, sort, seq scan, each traced
# under its own trace id, sampled at 250 Hz, read back with traceprof.profile().
if want frames; then
say "named frames: building 2,000,000 + 50,000 rows"
SQL_OPTIONS="-c traceprof.sample_rate=0"
sql -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
sql <<'SQL'
CREATE TABLE frames_big AS SELECT g AS id, g % 50000 AS k, md5(g::text) AS pad FROM generate_series(1, 2000000) g;
CREATE TABLE frames_dim AS SELECT g AS k, md5(g::text) AS name FROM generate_series(0, 49999) g;
VACUUM ANALYZE frames_big, frames_dim;
SQL
say "named frames: profiling a hash join, a sort and a seq scan (250 Hz)"
sql >/dev/null <<'SQL'
SET max_parallel_workers_per_gather = 0;
SET work_mem = '64MB';
SET traceprof.profile = traced;
SET traceprof.sample_hz = 250;
SET traceprof.traceparent = '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01-00f067aa0ba902b7-01';
SELECT count(*), sum(b.id) FROM frames_big b JOIN frames_dim d USING (k) WHERE d.name > '1';
SELECT count(*), sum(b.id) FROM frames_big b JOIN frames_dim d USING (k) WHERE d.name > '2';
SELECT count(*), sum(b.id) FROM frames_big b JOIN frames_dim d USING (k) WHERE d.name > '3';
SET traceprof.traceparent = '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa02-00f067aa0ba902b7-01';
SELECT count(*) FROM (SELECT pad FROM frames_big ORDER BY pad OFFSET 0) s;
SELECT count(*) FROM (SELECT id FROM frames_big ORDER BY k, id DESC OFFSET 0) s;
SET traceprof.traceparent = '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa03-00f067aa0ba902b7-01';
SELECT count(*) FROM frames_big WHERE pad LIKE '%abc%';
SELECT count(*) FROM frames_big WHERE pad LIKE '%abc%';
SELECT count(*) FROM frames_big WHERE k * 2 + id % 7 = 12345;
SELECT count(*) FROM frames_big WHERE k * 2 + id % 7 = 12345;
RESET traceprof.traceparent;
SQL
plans=$(sql -c "SET max_parallel_workers_per_gather = 0" -c "EXPLAIN (COSTS OFF) SELECT count(*), sum(b.id) FROM frames_big b JOIN frames_dim d USING (k) WHERE d.name > '1'" | tr '\n' ' ')
echo
echo "named frames in server profiles (traceprof.profile(), CPU samples at 250 Hz, Debian's stripped postgres)"
echo "named: not [unknown]... and not <module>+0x<hex>; with module+0x: only [unknown]... is unnamed"
printf '%-10s %8s %8s %9s %16s %10s %16s %9s\n' profile samples frames named "named+module0x" "leaf named" "leaf named+mod0x" distinct
for q in "hash join:01" "sort:02" "seq scan:03" "all three:0"; do
	qname=${q%:*} id=${q#*:}
	if [ "$id" = 0 ]; then
		from="(SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01') UNION ALL SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa02') UNION ALL SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa03'))"
	else
		from="traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa$id')"
	fi
	sql -F' ' -c "
		WITH p AS (SELECT * FROM $from p),
		f AS (SELECT p.samples, t.frame, t.ord = cardinality(string_to_array(p.stack, ';')) AS leaf
		      FROM p, unnest(string_to_array(p.stack, ';')) WITH ORDINALITY AS t(frame, ord)),
		g AS (SELECT *, frame !~ '^\[unknown\]' AS known, frame !~ '^\[unknown\]' AND frame !~ '\+0x[0-9a-f]+\$' AS named FROM f)
		SELECT (SELECT coalesce(sum(samples), 0) FROM p), sum(samples),
			100.0 * sum(samples) FILTER (WHERE named) / nullif(sum(samples), 0),
			100.0 * sum(samples) FILTER (WHERE known) / nullif(sum(samples), 0),
			100.0 * sum(samples) FILTER (WHERE named AND leaf) / nullif(sum(samples) FILTER (WHERE leaf), 0),
			100.0 * sum(samples) FILTER (WHERE known AND leaf) / nullif(sum(samples) FILTER (WHERE leaf), 0),
			count(DISTINCT frame)
		FROM g" |
		awk -v n="$qname" -v summary="${BENCH_SUMMARY:-}" '{ printf "%-10s %8d %8d %8.1f%% %15.1f%% %9.1f%% %15.1f%% %9d  %s\n", n, $1, $2, $3, $4, $5, $6, $7,
			n == "all three" ? ($3 >= 75 ? "target >= 75% named: met" : "target >= 75% named: NOT met") : ""
			if (summary != "")
				printf "pgbench|share of sampled frames named, %s (no debug file)|%.1f%%|%s\n", n, $3,
					n == "all three" ? ">= 75%" : "" >>summary }'
done
echo "frames: every frame of every sample (weighted by samples); leaf: the frame that was running; distinct: frame names"
echo "hash join plan: $plans"
echo "most frequent unnamed frames (all three profiles, samples on the stack):"
sql -F' ' -c "
	SELECT sum(samples), frame FROM (
		SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa01') UNION ALL
		SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa02') UNION ALL
		SELECT * FROM traceprof.profile('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa03')) p,
		unnest(string_to_array(p.stack, ';')) AS frame
	WHERE frame ~ '^\[unknown\]' OR frame ~ '\+0x[0-9a-f]+\$'
	GROUP BY frame ORDER BY 1 DESC LIMIT 8" | awk '{ printf "  %6d  %s\n", $1, $2 }'
fi

# ---------------------------------------------------------------------------
# Instructions per statement, which machine noise cannot touch: callgrind
# on a single-user backend (postgres --single) over cluster A's pgbench
# tables, the same statements with no extension (also with compute_query_id
# = on, for scale: what pg_stat_statements' query ids cost), idle, tracing
# 100% and tracing 100% in full detail.
# Two run lengths are subtracted, so start-up cancels.  Simple protocol
# only, no network, no exporter (no background workers in single-user
# mode).  The sampler row is its per-statement bookkeeping (arming,
# labels, flushes): under valgrind the CPU-clock timer runs on valgrind's
# slowed-down clock and fires ~50x too often per statement, so the sampler
# runs at 1 Hz and the work of the samples themselves (the signal handler,
# draining and naming them) is subtracted; the cost per sample is
# bench/sampler.sh's.  A CPU-heavy first statement gets samples into both
# run lengths, so loading the symbol tables (once per backend) cancels too.
if ! want instructions; then
	:
elif command -v valgrind >/dev/null 2>&1; then
	say "instructions per statement: callgrind on a single-user backend"
	use_cluster A
	# Vacuumed and checkpointed: no pruning or hint-bit work left for the
	# statements to do.
	SQL_OPTIONS='' sql -c "VACUUM" -c "CHECKPOINT"
	kill -INT "$CLUSTER_PID"
	while kill -0 "$CLUSTER_PID" 2>/dev/null; do sleep 0.1; done
	# Every run starts from the same copy of the data directory: TPC-B
	# writes, and later runs would otherwise see other pages.
	cp -a "$CLUSTER_DIR/data" "$CLUSTER_DIR/data.snap"
	mkdir -p "$dir/cg"
	if [ "$(id -u)" = 0 ]; then
		chmod 711 "$dir"
		chown postgres: "$dir/cg"
	fi
	# pgbench's statements with its random ranges (scale $scale), fixed seed.
	awk -v n=3000 -v s="$scale" 'BEGIN { srand(1)
		for (i = 0; i < n; i++) printf "SELECT abalance FROM pgbench_accounts WHERE aid = %d;\n", int(rand() * 100000 * s) + 1
	}' >"$dir/cg/select.sql"
	awk -v n=600 -v s="$scale" 'BEGIN { srand(2)
		for (i = 0; i < n; i++) {
			aid = int(rand() * 100000 * s) + 1; bid = int(rand() * s) + 1
			tid = int(rand() * 10 * s) + 1; delta = int(rand() * 10001) - 5000
			print "BEGIN;"
			printf "UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;\n", delta, aid
			printf "SELECT abalance FROM pgbench_accounts WHERE aid = %d;\n", aid
			printf "UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d;\n", delta, tid
			printf "UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d;\n", delta, bid
			printf "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP);\n", tid, bid, aid, delta
			print "END;"
		}
	}' >"$dir/cg/tpcb.sql"
	# callgrind_ir CONFIG FILE LINES: instructions of one single-user run.
	callgrind_ir() {
		case $1 in
		none) opts="-c shared_preload_libraries=" ;;
		queryid) opts="-c shared_preload_libraries= -c compute_query_id=on" ;;
		idle) opts="-c shared_preload_libraries=traceprof -c traceprof.sample_rate=0" ;;
		trace) opts="-c shared_preload_libraries=traceprof -c traceprof.sample_rate=1 -c traceprof.profile=off" ;;
		full) opts="-c shared_preload_libraries=traceprof -c traceprof.sample_rate=1 -c traceprof.profile=off -c traceprof.track_planning=on -c traceprof.track_cpu_time=on" ;;
		sampler) opts="-c shared_preload_libraries=traceprof -c traceprof.sample_rate=1 -c traceprof.sample_hz=1" ;;
		esac
		{
			echo "SELECT count(*) FROM generate_series(1, 2000000);"
			head -n "$3" "$2"
		} >"$dir/cg/input.sql"
		rm -f "$dir/cg/out"
		# Selects write nothing (the tables are vacuumed): only TPC-B needs
		# a fresh copy.
		if [ "$2" = "$dir/cg/tpcb.sql" ] || [ ! -d "$CLUSTER_DIR/data.run" ]; then
			rm -rf "$CLUSTER_DIR/data.run"
			cp -a "$CLUSTER_DIR/data.snap" "$CLUSTER_DIR/data.run"
		fi
		# shellcheck disable=SC2086 # opts holds several options
		as_postgres valgrind --tool=callgrind --callgrind-out-file="$dir/cg/out" \
			"$PG_BIN/postgres" --single -D "$CLUSTER_DIR/data.run" $opts app \
			<"$dir/cg/input.sql" >/dev/null 2>"$dir/cg/err" || {
			say "postgres --single under callgrind failed ($1)"
			cat "$dir/cg/err" >&2
			exit 1
		}
		total=$(awk '/^(totals|summary):/ { print $2; exit }' "$dir/cg/out")
		samples=0
		[ "$1" = sampler ] && samples=$(callgrind_annotate --inclusive=yes --threshold=100 "$dir/cg/out" |
			awk '/:(sample_handler|tp_sampler_drain) \[/ { gsub(",", "", $1); s += $1 } END { print s + 0 }')
		echo $((total - samples))
	}
	for wl in select tpcb; do
		if [ "$wl" = select ]; then short=200 long=600 per=1; else short=350 long=1050 per=7; fi
		for cfg in none queryid idle trace full sampler; do
			a=$(callgrind_ir "$cfg" "$dir/cg/$wl.sql" "$short")
			b=$(callgrind_ir "$cfg" "$dir/cg/$wl.sql" "$long")
			echo "$wl $cfg $a $b $(( (long - short) / per ))" >>"$dir/cg/results"
		done
	done
	echo
	echo "instructions per transaction (callgrind, single-user backend, simple protocol; difference of two run lengths)"
	awk -v summary="${BENCH_SUMMARY:-}" '
		{ ir[$1, $2] = ($4 - $3) / $5 }
		END {
			name["select"] = "select-only (1 statement)"; name["tpcb"] = "TPC-B-like (7 statements)"
			printf "%-26s %13s %17s %7s %13s %7s %13s %7s %13s %7s %13s %10s\n", "transaction", "no extension",
				"compute_query_id", "ratio", "loaded, idle", "ratio", "tracing 100%", "ratio",
				"tracing, full", "ratio", "+ sampler", "/ tracing"
			split("select tpcb", w, " ")
			for (i = 1; i <= 2; i++)
				printf "%-26s %13.0f %17.0f %7.4f %13.0f %7.4f %13.0f %7.4f %13.0f %7.4f %13.0f %10.4f\n", name[w[i]], ir[w[i], "none"],
					ir[w[i], "queryid"], ir[w[i], "queryid"] / ir[w[i], "none"],
					ir[w[i], "idle"], ir[w[i], "idle"] / ir[w[i], "none"],
					ir[w[i], "trace"], ir[w[i], "trace"] / ir[w[i], "none"],
					ir[w[i], "full"], ir[w[i], "full"] / ir[w[i], "none"],
					ir[w[i], "sampler"], ir[w[i], "sampler"] / ir[w[i], "trace"]
			for (i = 1; summary != "" && i <= 2; i++) {
				printf "pgbench|%s: instructions per transaction, idle / tracing / tracing in full detail, to no extension (callgrind)|%.4fx / %.4fx / %.4fx|\n",
					name[w[i]], ir[w[i], "idle"] / ir[w[i], "none"], ir[w[i], "trace"] / ir[w[i], "none"],
					ir[w[i], "full"] / ir[w[i], "none"] >>summary
				printf "pgbench|%s: sampler bookkeeping per transaction, to tracing (callgrind, the work of samples excluded)|%.4fx|<= 1.01x with the per-sample cost|\n",
					name[w[i]], ir[w[i], "sampler"] / ir[w[i], "trace"] >>summary
			}
		}' "$dir/cg/results"
	echo "compute_query_id: no extension, compute_query_id = on (pg_stat_statements turns it on; traceprof uses its query ids when computed, never jumbles itself)"
	echo "tracing: the defaults; full: traceprof.track_planning = on, traceprof.track_cpu_time = on (a plan span; the clock's system calls are not counted here)"
	echo "+ sampler: tracing with traceprof.profile = traced, the sampler's per-statement bookkeeping without the samples' own work (per sample: bench/sampler.sh)"
	echo "(instructions only: no cache misses, no system calls, no exporter; a CPU-time view without machine noise)"
else
	echo
	echo "(valgrind not installed: no instruction counts)"
fi

elapsed=$(( $(date +%s) - started_at ))
echo
echo "bench/pgbench.sh: $elapsed s in all"

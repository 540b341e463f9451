#!/bin/sh
# bench/compare_builds.sh - builds of the extension against each other and
# against no extension, in TPS and server CPU per transaction, the way
# bench/pgbench.sh's concurrent section measures the targets.  Prints
# tables; asserts nothing.  For a change to the statements' path whose
# effect is a point or two, where runs of one build after another drift
# apart by more than that.
#
#   bench/compare_builds.sh bare /tmp/before.so /tmp/after.so
#   CONFIG=idle ROUNDS=12 bench/compare_builds.sh bare /tmp/x.so
#   WORKLOAD=tpcb bench/compare_builds.sh /tmp/x.so /tmp/x.so@traceprof.max_spans=32768
#
# A build is a traceprof.so (built from any commit: `git worktree add`,
# `make all`, `make -C extension`), or `bare`: cluster B without a library.
# Since 8f68346 a build has a second library, which its workers load: it is
# looked for beside the first as NAME_exporter.so (the build directory's
# traceprof_exporter.so for its traceprof.so), and installed with it (a
# build that has a build identity and no such file is refused);
# without one (older builds) none is installed.
# A build may carry settings B starts with, after its file:
# BUILD@name=value[@name=value...] (no blanks): the same library with
# another traceprof.max_spans, say, is a build of its own.  Rows are named
# by the file name without .so, and the settings.
# Clusters A (no extension) and B are driven at once, select-only, every
# CPU running one pgbench client pinned to it and its backend, of each
# cluster, for SECONDS_PER_RUN (10); a round runs every build once, B
# restarted with it (the build copied over the installed traceprof.so,
# which is put back at exit), the order rotating from round to round.  A
# round's ratio is B's over A's in the same seconds; a build's row is the
# median over ROUNDS (6) rounds, its 95% confidence interval and range.
# WORKLOAD: select (pgbench -S, the default) or tpcb (pgbench's TPC-B-like
# transaction: before each run both clusters' history table is emptied
# and the small tables vacuumed, as bench/pgbench.sh does).
# CONFIG: trace (sample_rate 1, no export; the default), idle (loaded,
# nothing traced) or export (as trace, to bench/sink.py; a run's CPU is
# read once the sink went quiet, bench/sink_quiet.sh; the spans dropped are
# not counted here, bench/pgbench.sh counts them).
set -eu

rounds=${ROUNDS:-6}
secs=${SECONDS_PER_RUN:-10}
scale=${SCALE:-10}
config=${CONFIG:-trace}
workload=${WORKLOAD:-select}
ncpus=$(nproc)

. scripts/cluster.sh
. bench/awk_stats.sh
. bench/sink_quiet.sh

say() {
	echo "bench/compare_builds.sh: $*" >&2
}

[ $# -gt 0 ] || { say "usage: bench/compare_builds.sh BUILD... (a traceprof.so, or bare)"; exit 2; }
# build_file BUILD: its library (or bare); build_settings BUILD: its settings, one a line.
build_file() {
	echo "${1%%@*}"
}
build_settings() {
	case $1 in *@*) echo "${1#*@}" | tr @ '\n' ;; esac
}
build_name() {
	case $1 in
	*@*) echo "$(basename "$(build_file "$1")" .so)@${1#*@}" ;;
	*) basename "$1" .so ;;
	esac
}
for arg in "$@"; do
	build=$(build_file "$arg")
	case $arg in
	*' '* | *@@* | *@) say "$arg: settings are name=value after @, without blanks"; exit 2 ;;
	esac
	for setting in $(build_settings "$arg"); do
		case $setting in
		*[!A-Za-z0-9_.]*=*) say "$arg: $setting: a setting's name is letters, digits, _ and ."; exit 2 ;;
		?*=?*) ;;
		*) say "$arg: $setting: name=value expected"; exit 2 ;;
		esac
	done
	if [ "$build" = bare ]; then
		[ "$arg" = bare ] || { say "$arg: bare runs without the library, and so without its settings"; exit 2; }
		continue
	fi
	[ -f "$build" ] || { say "$build: no such file (a traceprof.so, or bare)"; exit 2; }
	case $build in
	*_exporter.so) say "$build: a workers' library; name the traceprof.so it goes with"; exit 2 ;;
	esac
	# A build of two libraries (it has a build identity) is measured with its own workers.
	if nm -D --defined-only "$build" | grep -q ' traceprof_build_id$' && [ ! -f "${build%.so}_exporter.so" ]; then
		say "$build: its workers' library ${build%.so}_exporter.so is missing (copy the build's traceprof_exporter.so there)"
		exit 2
	fi
done
# Rows are named by file name (without .so; bare) and settings: two builds of one name would be one row.
names=$(for build in "$@"; do build_name "$build"; done)
[ "$(echo "$names" | sort -u | wc -l)" = $# ] ||
	{ say "builds need distinct file names (rows are named by them): $(echo "$names" | tr "\n" " ")"; exit 2; }
case $config in
trace | idle | export) ;;
*) say "CONFIG=$config: trace, idle or export expected"; exit 2 ;;
esac
case $workload in
select) workload_flags=-S workload_name=select-only ;;
tpcb) workload_flags='' workload_name=TPC-B-like ;;
*) say "WORKLOAD=$workload: select or tpcb expected"; exit 2 ;;
esac
libdir=$("$PG_BIN/pg_config" --pkglibdir)
installed=$libdir/traceprof.so
installed_exporter=$libdir/traceprof_exporter.so
[ -f "$installed" ] || { say "traceprof.so not installed; run make install-extension"; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/traceprof-bench-builds.XXXXXX")
cp "$installed" "$dir/installed.so"
[ ! -f "$installed_exporter" ] || cp "$installed_exporter" "$dir/installed_exporter.so"
sink_pid=

# install_build BUILD: the build in the libraries' place, each replaced in one
# rename (a process starting meanwhile loads one file or the other, whole).
install_build() {
	exporter=${1%.so}_exporter.so
	if [ -f "$exporter" ]; then
		cp "$exporter" "$installed_exporter.tmp" && mv "$installed_exporter.tmp" "$installed_exporter"
	else
		rm -f "$installed_exporter"
	fi
	cp "$1" "$installed.tmp" && mv "$installed.tmp" "$installed"
}

cleanup() {
	set +e
	cluster_stop
	for c in A B; do
		use_cluster "$c"
		cluster_stop
	done
	# The installed libraries as they were.
	install_build "$dir/installed.so"
	[ -z "$sink_pid" ] || kill "$sink_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# psql on the current cluster's app database, never traced itself.
sql() {
	PGOPTIONS="-c traceprof.sample_rate=0" PSQL_DB=app psql_app -At -q -c "$1"
}

endpoint=
if [ "$config" = export ]; then
	python3 bench/sink.py "$dir/sink.port" &
	sink_pid=$!
	for _ in $(seq 1 100); do
		[ -s "$dir/sink.port" ] && break
		sleep 0.1
	done
	[ -s "$dir/sink.port" ] || { say "bench/sink.py did not start"; exit 1; }
	endpoint="http://127.0.0.1:$(cat "$dir/sink.port")"
fi
rate=1
[ "$config" != idle ] || rate=0

start_cluster() {	# start_cluster NAME [conf lines...]
	name=$1
	shift
	cluster_start "shared_buffers = 256MB" "synchronous_commit = off" "autovacuum = off" \
		"checkpoint_timeout = 1h" "$@" >/dev/null
	save_cluster "$name"
	as_postgres "$PG_BIN/pgbench" -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -i -q -s "$scale" app \
		>"$dir/init.log" 2>&1 || { cat "$dir/init.log" >&2; exit 1; }
	# No dirty pages of pgbench -i left to write during the runs.
	sql "CREATE EXTENSION pg_prewarm" >/dev/null
	sql "CHECKPOINT" >/dev/null
}
say "two PostgreSQL 15 clusters (pgbench scale $scale); $workload_name, $config; $rounds rounds of $# builds, $secs s each"
start_cluster A
start_cluster B "shared_preload_libraries = 'traceprof'" "traceprof.sample_rate = $rate" \
	"traceprof.profile = off" "traceprof.otlp_endpoint = '$endpoint'" "traceprof.export_interval = '200ms'"
# traceprof.stats, which the export runs read (every build but bare preloads traceprof).
use_cluster B
sql "CREATE EXTENSION traceprof" >/dev/null

# warm_up CLUSTER: a short untraced run, and the tables in shared buffers
# (pgbench -i loads them through a small ring of buffers).  A, never
# restarted, needs it as much as B: cold, its first run put a traced build
# at 1.001x of it.
warm_up() {
	use_cluster "$1"
	as_postgres env PGOPTIONS="-c traceprof.sample_rate=0" "$PG_BIN/pgbench" -h "$CLUSTER_DIR" \
		-p "$CLUSTER_PORT" -U postgres -n $workload_flags -c "$ncpus" -j "$ncpus" -T 2 app >/dev/null 2>&1 ||
		{ say "warm-up of cluster $1 failed"; exit 1; }
	sql "SELECT sum(pg_prewarm(c)) FROM unnest('{pgbench_accounts,pgbench_accounts_pkey}'::regclass[]) c" >/dev/null
}
warm_up A

# restart_b BUILD: cluster B with the build, warmed up.
restart_b() {
	use_cluster B
	cluster_halt
	if [ "$1" = bare ]; then
		cluster_launch -c "shared_preload_libraries=" || exit 1
	else
		install_build "$(build_file "$1")"
		# shellcheck disable=SC2046 # one -c per setting; none has blanks
		cluster_launch $(build_settings "$1" | sed 's/^/-c /') || exit 1
	fi
	save_cluster B
	# A value the server refused (out of range, a misspelt name) leaves it
	# running with another: the build would be measured as something else.
	for setting in $(build_settings "$1"); do
		source=$(sql "SELECT source FROM pg_settings WHERE name = '${setting%%=*}'")
		[ "$source" = "command line" ] ||
			{ say "$1: ${setting%%=*} not set as given (${source:-no such setting}; see the server's log)"; exit 1; }
	done
	warm_up B
}

# Until no client backend is left, so that its CPU is in the postmaster's cutime.
settle() {
	use_cluster "$1"
	wait_no_clients
}

# One pgbench of one client per CPU on cluster $1, pinned there, output in
# $2.N; its backend is moved there once connected (pin_backends, cluster.sh).
drive() {
	use_cluster "$1"
	cpu=0
	while [ "$cpu" -lt "$ncpus" ]; do
		as_postgres env PGAPPNAME="bench_cpu$cpu" PGOPTIONS="" taskset -c "$cpu" "$PG_BIN/pgbench" \
			-h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -n $workload_flags -c 1 -j 1 -T "$secs" app >"$2.$cpu" 2>&1 &
		pids="$pids $!"
		cpu=$((cpu + 1))
	done
}

sum_of() {	# sum_of PATTERN FILES...: the first number after PATTERN, summed
	pattern=$1
	shift
	cat "$@" | sed -n "s/^$pattern \([0-9.]*\).*/\1/p" | awk '{ t += $1 } END { print t + 0 }'
}

r=1
while [ "$r" -le "$rounds" ]; do
	# The order rotates: build i runs at place (i + r) mod n.
	order=$(for b in "$@"; do echo "$b"; done | awk -v r="$r" -v n=$# '{ a[NR - 1] = $0 } END { for (i = 0; i < n; i++) print a[(i + r) % n] }')
	for build in $order; do
		restart_b "$build"
		[ "$workload" != tpcb ] || for c in A B; do
			use_cluster "$c"
			sql "TRUNCATE pgbench_history" >/dev/null
			sql "VACUUM pgbench_branches, pgbench_tellers" >/dev/null
		done
		settle A
		settle B
		use_cluster A
		ta=$(server_ticks)
		use_cluster B
		tb=$(server_ticks)
		pids=
		drive A "$dir/a"
		drive B "$dir/b"
		sleep 0.3
		use_cluster A
		pin_backends "$ncpus" || exit 1
		use_cluster B
		pin_backends "$ncpus" || exit 1
		for p in $pids; do
			wait "$p" || { say "pgbench failed"; cat "$dir"/a.* "$dir"/b.* >&2; exit 1; }
		done
		# The exporter's CPU for this run's spans is B's too.
		[ "$config" != export ] || sink_quiet "$endpoint" || say "round $r: B's CPU may miss the exporter's last requests"
		settle A
		settle B
		use_cluster A
		ta=$(($(server_ticks) - ta))
		use_cluster B
		tb=$(($(server_ticks) - tb))
		if [ "$config" = export ] && [ "$build" != bare ]; then
			pending=$(sql "SELECT spans_pending FROM traceprof.stats")
			[ "$pending" = 0 ] || say "round $r: $pending spans still to export when the sink went quiet; B's CPU for them is not in this round"
		fi
		echo "$r $(build_name "$build") $(sum_of 'tps =' "$dir"/a.*) $(sum_of 'tps =' "$dir"/b.*)" \
			"$ta $(sum_of 'number of transactions actually processed:' "$dir"/a.*)" \
			"$tb $(sum_of 'number of transactions actually processed:' "$dir"/b.*)" |
			awk '{ printf "round %s %-12s A %.0f TPS, B %.0f TPS: %.4f, CPU per tx %.4f\n", $1, $2, $3, $4, $4 / $3, ($7 / $8) / ($5 / $6) }' |
			tee -a "$dir/rounds" >&2
	done
	r=$((r + 1))
done

echo "$workload_name, $config, B against A in the same seconds ($rounds rounds of $secs s, pinned; median [95% CI] (range))"
# Against bare: each round's ratio over bare's in the same round.
awk "$AWK_STATS"'
	{ tps[$3, $2] = $10; cpu[$3, $2] = $14; if (!($3 in seen)) { seen[$3] = 1; names[++count] = $3 }; if ($2 > rounds) rounds = $2 }
	END {
		printf "%-12s %-38s %-8s %s\n", "build", "TPS ratio", "CPU/tx", ("bare" in seen) ? "against bare: TPS, CPU/tx" : ""
		for (b = 1; b <= count; b++) {
			name = names[b]
			for (i = 1; i <= rounds; i++) {
				t[i] = tps[name, i]; c[i] = cpu[name, i]
				if ("bare" in seen) { tb[i] = t[i] / tps["bare", i]; cb[i] = c[i] / cpu["bare", i] }
			}
			against = ("bare" in seen) ? sprintf("%.4f, %.4f", median(tb, rounds), median(cb, rounds)) : ""
			mc = median(c, rounds)
			mt = median(t, rounds)
			lo = ci_rank(rounds)
			printf "%-12s %.4f [%.4f, %.4f] (%.4f..%.4f) %.4f   %s\n", name, mt, t[lo], t[rounds - lo + 1], t[1], t[rounds], mc, against
		}
	}' "$dir/rounds"

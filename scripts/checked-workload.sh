# checked-workload.sh - the small generator + loader workload that
# run-sanitize-checks.sh and run-valgrind-checks.sh run under their checker.
# Source it after cluster.sh, set WORK (a temp dir), then:
#   checked_workload BIN_DIR RECORDS WRAPPER...
# WRAPPER (e.g. "valgrind --error-exitcode=1 ...", or "env" for none) runs
# each binary; a run fails on an unexpected exit status or when its stderr
# holds a sanitizer or memcheck report.  Needs a started cluster.

# checked NAME EXPECTED_STATUS COMMAND...
checked() {
	name=$1
	expected=$2
	shift 2
	status=0
	"$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || status=$?
	if [ "$status" != "$expected" ] ||
		grep -q -e 'Sanitizer' -e 'runtime error:' -e '^==[0-9]*== [A-Z].*\(Invalid\|uninitialised\|definitely lost\)' \
			"$WORK/$name.err"; then
		echo "checked: $name: exit $status (expected $expected); stdout and stderr end with:" >&2
		tail -n 20 "$WORK/$name.out" | sed 's/^/  /' >&2
		tail -n 60 "$WORK/$name.err" | sed 's/^/  /' >&2
		return 1
	fi
	echo "checked: $name: exit $status as expected"
}

checked_workload() {
	bin=$1
	records=$2
	shift 2
	# Export attempts go to a closed port: the failure path runs too, quickly.
	export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 OTEL_EXPORTER_OTLP_TIMEOUT=2000

	checked generator-json 0 "$@" "$bin/generator" "$records" "$WORK/orders.json" \
		--profile-out "$WORK/generator.svg"
	checked generator-ndjson 0 "$@" "$bin/generator" "$records" "$WORK/orders.ndjson" \
		--format ndjson --seed 7 --profile-out "$WORK/generator.pprof"
	checked loader-json 0 "$@" "$bin/loader" "$CLUSTER_URL" "$WORK/orders.json" \
		--profile-out "$WORK/loader.json"
	checked loader-ndjson-batches 0 "$@" "$bin/loader" "$CLUSTER_URL" "$WORK/orders.ndjson" \
		--table orders_batched --batch-size 500 --profile-out "$WORK/loader.folded"

	# The error paths: a bad record, a refused duplicate key, bad usage.
	printf '[{"id":1,"customer_id":2,"customer_name":"a","amount":1.5,"currency":"EUR","created_at":"2026-03-14T09:26:53Z","tags":["x"],"attributes":{}},\n {"id":2}]\n' \
		>"$WORK/bad.json"
	checked loader-bad-record 3 "$@" "$bin/loader" "$CLUSTER_URL" "$WORK/bad.json" --table orders_bad
	checked loader-duplicate-keys 4 "$@" "$bin/loader" "$CLUSTER_URL" "$WORK/orders.json"
	checked generator-usage 2 "$@" "$bin/generator" 10
	checked loader-usage 2 "$@" "$bin/loader" "$CLUSTER_URL"

	rows=$(PSQL_DB=app psql_app -Atc "SELECT (SELECT count(*) FROM orders) || ' ' || (SELECT count(*) FROM orders_batched)")
	[ "$rows" = "$records $records" ] || { echo "checked: expected $records rows in each table, got $rows" >&2; return 1; }
	echo "checked: $records rows in orders and orders_batched"
}

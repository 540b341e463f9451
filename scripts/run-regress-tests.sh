#!/bin/sh
# Run the pg_regress suite (tests/regress) against a temporary instance with
# traceprof preloaded.  The extension must be installed (make install-extension).
# As root, pg_regress runs as the postgres OS user (initdb refuses root).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
pgxs=$(dirname "$(/usr/lib/postgresql/15/bin/pg_config --pgxs)")/../..
pg_regress="$pgxs/src/test/regress/pg_regress"
work=$(mktemp -d /tmp/traceprof-regress.XXXXXX)
trap '[ -n "${KEEP_REGRESS:-}" ] || rm -rf "$work"' EXIT

[ -x "$pg_regress" ] || { echo "run-regress-tests: $pg_regress not found; run 'make deps'" >&2; exit 1; }
cp -r "$root/tests/regress/sql" "$root/tests/regress/expected" "$root/tests/regress/traceprof.conf" "$work/"
chmod -R a+rwX "$work"
tests="install traceparent spans settings transactions visibility early_errors nesting"

run() {
	if [ "$(id -u)" = 0 ]; then
		setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
	else
		"$@"
	fi
}

status=0
(cd "$work" && run "$pg_regress" --temp-instance="$work/instance" \
	--temp-config="$work/traceprof.conf" --bindir=/usr/lib/postgresql/15/bin \
	--inputdir="$work" --outputdir="$work" --port="${REGRESS_PORT:-54329}" \
	--dbname=traceprof_regress $tests) || status=$?
if [ "$status" != 0 ] && [ -f "$work/regression.diffs" ]; then
	cat "$work/regression.diffs"
	mkdir -p "$root/build" && cp "$work/regression.diffs" "$root/build/regression.diffs"
fi
exit "$status"

#!/bin/sh
# Run the integration tests (tests/integration/*.test.js) with Node's
# built-in test runner: real PostgreSQL 15 clusters, a real OTLP capture
# receiver, foreign decoders.  Nothing is skipped: a missing prerequisite
# fails here, loudly.
#
#   scripts/run-integration-tests.sh [test-file ...]   (default: all)
#
# Environment: TEST_CONCURRENCY (default 2), TEST_TIMEOUT_MS (per test,
# default 120000), TRACEPROF_KEEP_CLUSTER / TRACEPROF_KEEP_TMP=1 keep temp dirs.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/tests/integration"
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
fail=0

die() {
	echo "run-integration-tests: $*" >&2
	fail=1
}

if ! command -v node >/dev/null 2>&1; then
	die "node is not installed; run 'make deps'"
else
	# Debian 12's own nodejs is 18.20; otlp-transformer 0.216 needs >= 18.19.
	node -e 'const [a, b] = process.versions.node.split(".").map(Number);
		process.exit(a > 18 || (a === 18 && b >= 19) ? 0 : 1)' ||
		die "node $(node --version) is too old: need Node 18.19 or later"
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is missing (Debian package chromium, for the flame graph browser test); run 'make deps'"
if [ ! -d "$dir/node_modules/@opentelemetry/otlp-transformer" ] || [ ! -d "$dir/node_modules/pprof-format" ] ||
   [ ! -d "$dir/node_modules/playwright-core" ] || [ ! -d "$dir/node_modules/pg" ]; then
	die "tests/integration/node_modules is missing or incomplete; run 'make deps'"
fi
for b in generator loader; do
	[ -x "$root/build/bin/$b" ] || die "build/bin/$b is missing; run 'make'"
done
for b in initdb postgres psql; do
	[ -x "$pg_bin/$b" ] || die "$pg_bin/$b is missing (PostgreSQL 15 server); run 'make deps'"
done
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
	die "running as root needs the 'postgres' OS user to run the server; run 'make deps'"
fi
[ "$fail" = 0 ] || { echo "run-integration-tests: FAILED: prerequisites missing, no test ran" >&2; exit 1; }

cd "$dir"
# These load both cores with pgbench for about a minute each: they run after
# the others, one at a time, since next to them the wall-time bounds of
# other files (faults.test.js) do not hold on a 2-core machine.
heavy="./extension-faults.test.js ./extension-soak.test.js"
if [ "$#" -gt 0 ]; then
	files="$*"
	heavy=""
else
	files=$(ls ./*.test.js | grep -v -x -e ./extension-faults.test.js -e ./extension-soak.test.js)
fi
# --test-timeout exists from Node 20.11; older runners rely on per-test timeouts.
timeout_flag=$(node -e 'const [a, b] = process.versions.node.split(".").map(Number);
	process.stdout.write(a > 20 || (a === 20 && b >= 11) ? "--test-timeout=" + (process.env.TEST_TIMEOUT_MS || 120000) : "")')
status=0
# shellcheck disable=SC2086
node --test --test-concurrency="${TEST_CONCURRENCY:-2}" $timeout_flag $files || status=1
if [ -n "$heavy" ]; then
	# shellcheck disable=SC2086
	node --test --test-concurrency=1 $timeout_flag $heavy || status=1
fi
[ "$status" = 0 ] || echo "run-integration-tests: FAILED (see 'not ok' above)" >&2
exit "$status"

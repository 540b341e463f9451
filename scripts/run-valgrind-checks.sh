#!/bin/sh
# run-valgrind-checks.sh - generator and loader (the normal build) under
# valgrind memcheck on the small workload of scripts/checked-workload.sh,
# against a throwaway PostgreSQL cluster.  Any memcheck error or definite
# leak fails the run.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
records=${VALGRIND_RECORDS:-2000}

command -v valgrind >/dev/null 2>&1 || { echo "run-valgrind-checks: valgrind not found (make deps installs it)" >&2; exit 1; }
${MAKE:-make} --no-print-directory -s build/bin/generator build/bin/loader

WORK=$(mktemp -d /tmp/traceprof-valgrind.XXXXXX)
chmod 755 "$WORK"
. "$root/scripts/cluster.sh"
. "$root/scripts/checked-workload.sh"
trap 'cluster_stop; rm -rf "$WORK"' EXIT

cluster_start
checked_workload "$root/build/bin" "$records" \
	valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
	--suppressions="$root/tests/valgrind/libunwind.supp"
echo "run-valgrind-checks: generator and loader clean under valgrind memcheck"

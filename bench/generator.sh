#!/bin/sh
# bench/generator.sh - how fast the generator writes, next to how fast the
# disk takes the same number of bytes (dd from /dev/zero, fsync'ed like the
# generator's output).  Prints a table; asserts nothing.  Assumes `make`.
#
#   N=1000000 RUNS=3 BENCH_DIR=/some/disk bench/generator.sh
#
# The generator's time is the one it reports itself (create temporary file
# to rename, fsync included; tracer start-up and export excluded).  Each
# run writes a fresh file, so freeing an old one is not measured.
set -eu

cd "$(dirname "$0")/.."
. bench/summary.sh
gen=build/bin/generator
n=${N:-1000000}
runs=${RUNS:-3}

if [ ! -x "$gen" ]; then
	echo "bench/generator.sh: $gen not found; run make first" >&2
	exit 1
fi

dir=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/traceprof-bench-generator.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() {
	date +%s.%N
}

# Best (shortest) generator time of $runs, in seconds; file size in $bytes.
run_generator() {
	best=""
	i=0
	while [ "$i" -lt "$runs" ]; do
		rm -f "$dir/out"
		secs=$("$gen" "$n" "$dir/out" --format "$1" 2>&1 >/dev/null |
			sed -n 's/^generator: wrote .* in \([0-9.]*\) s (.*/\1/p')
		if [ -z "$secs" ]; then
			echo "bench/generator.sh: generator failed for --format $1" >&2
			exit 1
		fi
		best=$(awk -v a="$secs" -v b="$best" 'BEGIN { print (b == "" || a < b) ? a : b }')
		i=$((i + 1))
	done
	bytes=$(stat -c %s "$dir/out")
	rm -f "$dir/out"
}

# Best time for dd to write and fsync $1 bytes (rounded up to MiB).
run_dd() {
	mib=$(( ($1 + 1048575) / 1048576 ))
	best=""
	i=0
	while [ "$i" -lt "$runs" ]; do
		rm -f "$dir/dd"
		t0=$(now)
		dd if=/dev/zero of="$dir/dd" bs=1M count="$mib" conv=fsync 2>/dev/null
		t1=$(now)
		best=$(awk -v a="$t0" -v b="$t1" -v c="$best" \
			'BEGIN { d = b - a; print (c == "" || d < c) ? d : c }')
		i=$((i + 1))
	done
	dd_bytes=$((mib * 1048576))
	rm -f "$dir/dd"
}

echo "generator: $n records, best of $runs runs, output in $dir (fsync included)"
printf '%-7s %12s %9s %12s %9s %11s %7s\n' \
	format bytes seconds records/s MB/s "disk MB/s" ratio
for format in json ndjson; do
	run_generator "$format"
	gen_secs=$best
	run_dd "$bytes"
	awk -v f="$format" -v n="$n" -v bytes="$bytes" -v gs="$gen_secs" \
		-v dbytes="$dd_bytes" -v ds="$best" 'BEGIN {
		rate = (gs > 0) ? n / gs : 0
		mbs = (gs > 0) ? bytes / gs / 1e6 : 0
		disk = (ds > 0) ? dbytes / ds / 1e6 : 0
		ratio = (disk > 0) ? mbs / disk : 0
		printf "%-7s %12d %9.3f %12.0f %9.1f %11.1f %7.2f\n",
			f, bytes, gs, rate, mbs, disk, ratio
	}'
	summary_row generator "records/s, $format, $n records (fsync included)" \
		"$(awk -v n="$n" -v gs="$gen_secs" 'BEGIN { printf "%.0f", (gs > 0) ? n / gs : 0 }')" ">= 2,000,000"
done
echo "MB = 10^6 bytes; disk MB/s: dd if=/dev/zero bs=1M conv=fsync of the same size, same directory; ratio = generator MB/s / disk MB/s"

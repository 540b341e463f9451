# bench/awk_stats.sh - awk functions the benchmarks share.  Sourced; put
# the program after them:  awk "$AWK_STATS"'{ ... median(list, n) ... }'

# shellcheck disable=SC2034 # used by the scripts that source this file
AWK_STATS='
	function sort(list, count,    i, j, t) {	# ascending, in place
		for (i = 2; i <= count; i++)
			for (j = i; j > 1 && list[j - 1] > list[j]; j--) {
				t = list[j]; list[j] = list[j - 1]; list[j - 1] = t
			}
	}
	function median(list, count) {	# sorts list
		sort(list, count)
		return count % 2 ? list[(count + 1) / 2] : (list[count / 2] + list[count / 2 + 1]) / 2
	}
	# In a sorted list, ranks ci_rank(count) and count - ci_rank(count) + 1
	# bracket the median with ~95% confidence (order statistics: binomial,
	# normal approximation; no assumption about the noise).
	function ci_rank(count,    k) {
		k = int(count / 2 - 0.98 * sqrt(count))
		return k < 1 ? 1 : k
	}
'

'use strict';
// The processes of a throwaway cluster, read from /proc: the postmaster's
// children by their titles, and a process's private memory.
//
// The traceprof exporter does not show in pg_stat_activity: a background
// worker gets a row there only once it connects to a database
// (BackgroundWorkerInitializeConnection), and the exporter never does.  Its
// process title, "postgres: traceprof exporter", finds it.

const fs = require('node:fs');

/** [{pid, title}] of the processes whose parent is ppid. */
function childrenOf(ppid) {
	const out = [];
	for (const d of fs.readdirSync('/proc')) {
		if (!/^\d+$/.test(d))
			continue;
		try {
			const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
			// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
			const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
			if (parent !== ppid)
				continue;
			const title = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0+/g, ' ').trim();
			out.push({ pid: Number(d), title });
		} catch {
			/* exited while we looked */
		}
	}
	return out;
}

/** Pids of the postmaster's children whose title matches re. */
function childPids(cluster, re) {
	return childrenOf(cluster.pid).filter((c) => re.test(c.title)).map((c) => c.pid);
}

/** Pid of the cluster's traceprof exporter, or null when none runs. */
function exporterPid(cluster) {
	const pids = childPids(cluster, /^postgres: traceprof exporter\b/);
	if (pids.length > 1)
		throw new Error(`${pids.length} traceprof exporters run under postmaster ${cluster.pid}: ${pids.join(', ')}`);
	return pids.length ? pids[0] : null;
}

/**
 * RssAnon of pid in kB (private memory: shared buffers and the shared
 * memory segment a process touches do not count), or null once it exited.
 */
function rssAnonKb(pid) {
	try {
		const m = /RssAnon:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
		return m ? Number(m[1]) : null;
	} catch {
		return null;
	}
}

module.exports = { childrenOf, childPids, exporterPid, rssAnonKb };

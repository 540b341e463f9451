'use strict';
// A frontend at the level of protocol messages, for what drivers do not
// expose: two named portals read page by page, interleaved.  Messages are
// built and parsed by npm pg-protocol (the parser npm pg itself uses); this
// file only sends them and waits for answers.

const net = require('node:net');
const path = require('node:path');
const { serialize, parse } = require('pg-protocol');

/** A StartupMessage of exactly params (pg-protocol's always asks for client_encoding UTF8). */
function startupMessage(params) {
	const body = Buffer.from(Object.entries(params).map(([name, value]) => `${name}\0${value}\0`).join('') + '\0');
	const head = Buffer.alloc(8);
	head.writeInt32BE(head.length + body.length, 0);
	head.writeInt32BE(3 << 16, 4);	// protocol 3.0
	return Buffer.concat([head, body]);
}

/**
 * Connect over the cluster's unix socket (trusted); clientEncoding, when
 * given, instead of UTF8.  Returns
 * { send(...buffers), until(name) -> the messages up to and including the
 * first called name (an ErrorResponse rejects), end() }.
 */
async function connectWire(cluster, user = 'postgres', database = 'app', clientEncoding = undefined) {
	const socket = net.createConnection(path.join(cluster.socketDir, `.s.PGSQL.${cluster.port}`));
	const inbox = [];
	let wake = null;
	let closed = null;
	parse(socket, (msg) => {
		inbox.push(msg);
		if (wake) wake();
	});
	socket.on('error', (e) => { closed = e; if (wake) wake(); });
	socket.on('close', () => { closed = closed || new Error('connection closed'); if (wake) wake(); });

	async function until(name) {
		const got = [];
		for (;;) {
			while (inbox.length > 0) {
				const msg = inbox.shift();
				got.push(msg);
				if (msg.name === 'error')
					throw Object.assign(new Error(`server error: ${msg.message}`), { code: msg.code, messages: got });
				if (msg.name === name)
					return got;
			}
			if (closed)
				throw closed;
			await new Promise((resolve) => { wake = resolve; });
			wake = null;
		}
	}
	const send = (...buffers) => socket.write(Buffer.concat(buffers));

	await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
	send(clientEncoding ? startupMessage({ user, database, client_encoding: clientEncoding }) : serialize.startup({ user, database }));
	await until('readyForQuery');
	return {
		send,
		until,
		/** A simple-protocol statement, to its ReadyForQuery. */
		query: (text) => { send(serialize.query(text)); return until('readyForQuery'); },
		end: () => { socket.end(serialize.end()); },
	};
}

module.exports = { connectWire, serialize };

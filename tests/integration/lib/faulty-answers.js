'use strict';
// The broken-server answers shared by the HTTP/1.1 capture servers
// (receiver.js for OTLP, ingest.js for Pyroscope).  Each takes over the
// response when its behaviour asks for it:
//
//   {destroy: true}   close the connection without answering (a FIN)
//   {reset: true}     abort the connection with a TCP RST
//   {hang: true}      accept the request, never answer
//   {trickle: true}   200 with a long body sent one byte a second, never ending
//   {cutBody: true}   200 whose body stops short of its Content-Length (the connection closes)
//   {interim: {h: v}} first an interim 103 Early Hints with these header fields, then the
//                     rest of the behaviour (not a fault by itself)

/**
 * Answer req/res per behaviour b if b is a fault; returns false when it is
 * not one (the caller answers normally).  server.hung collects hung
 * responses, server.timers the trickle intervals, so close() can end them.
 */
function answerFault(server, req, res, b) {
	if (b.interim) {
		const fields = Object.entries(b.interim).map(([name, value]) => `${name}: ${value}\r\n`).join('');
		req.socket.write(`HTTP/1.1 103 Early Hints\r\n${fields}\r\n`);
	}
	if (b.destroy) {
		req.socket.destroy();
		return true;
	}
	if (b.reset) {
		req.socket.resetAndDestroy();
		return true;
	}
	if (b.hang) {
		server.hung.push(res);
		return true;
	}
	if (b.cutBody) {
		res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 100 });
		res.write(Buffer.alloc(10), () => req.socket.destroy());
		return true;
	}
	if (b.trickle) {
		res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 100000 });
		const timer = setInterval(() => res.write(Buffer.from([0x20])), 1000);
		server.timers.add(timer);
		res.on('close', () => {
			clearInterval(timer);
			server.timers.delete(timer);
		});
		return true;
	}
	return false;
}

module.exports = { answerFault };

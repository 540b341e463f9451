'use strict';
// OTLP decoding with a decoder we did not write: the protobufjs root that
// @opentelemetry/otlp-transformer 0.216.0 generates from the official OTLP
// protos (build/src/generated/root.js).

const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');

const traceV1 = root.opentelemetry.proto.collector.trace.v1;
const ExportTraceServiceRequest = traceV1.ExportTraceServiceRequest;
const ExportTraceServiceResponse = traceV1.ExportTraceServiceResponse;

if (typeof ExportTraceServiceRequest?.decode !== 'function' ||
	typeof ExportTraceServiceResponse?.encode !== 'function')
	throw new Error('@opentelemetry/otlp-transformer root has no ExportTraceService{Request,Response}: ' +
		'is the pinned version 0.216.0 installed (make deps)?');

const SpanKind = { UNSPECIFIED: 0, INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 };
const StatusCode = { UNSET: 0, OK: 1, ERROR: 2 };

function hex(bytes) {
	if (!bytes || bytes.length === 0)
		return '';
	return Buffer.from(bytes).toString('hex');
}

/** Long (or number) -> BigInt; undefined when absent. */
function toBigInt(v) {
	if (v === undefined || v === null)
		return undefined;
	if (typeof v === 'number')
		return BigInt(v);
	if (typeof v === 'string')
		return BigInt(v);
	return BigInt(v.toString());	/* Long: toString honours `unsigned` */
}

/** int64 -> Number when it is exact, else BigInt. */
function toInt(v) {
	const b = toBigInt(v);
	return (b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER)) ? Number(b) : b;
}

function anyValue(v) {
	if (!v)
		return undefined;
	switch (v.value) {	/* protobufjs: the name of the oneof member that is set */
		case 'stringValue': return v.stringValue;
		case 'boolValue': return v.boolValue;
		case 'intValue': return toInt(v.intValue);
		case 'doubleValue': return v.doubleValue;
		case 'bytesValue': return Buffer.from(v.bytesValue);
		case 'arrayValue': return (v.arrayValue.values || []).map(anyValue);
		case 'kvlistValue': return attributes(v.kvlistValue.values);
		default: return undefined;
	}
}

/**
 * KeyValue list -> {key: value}.  A repeated key would hide data, so it is
 * kept visible as `__duplicate__<key>` (tests can assert it is absent).
 */
function attributes(list) {
	const out = {};
	for (const kv of list || []) {
		const key = Object.prototype.hasOwnProperty.call(out, kv.key) ? `__duplicate__${kv.key}` : kv.key;
		out[key] = anyValue(kv.value);
	}
	return out;
}

function attributeTypes(list) {
	const out = {};
	for (const kv of list || [])
		out[kv.key] = kv.value ? kv.value.value : undefined;
	return out;
}

function span(s, resource, scope) {
	return {
		traceId: hex(s.traceId),
		spanId: hex(s.spanId),
		parentSpanId: hex(s.parentSpanId),
		traceState: s.traceState || '',
		name: s.name,
		kind: s.kind || 0,
		startTimeUnixNano: toBigInt(s.startTimeUnixNano) ?? 0n,
		endTimeUnixNano: toBigInt(s.endTimeUnixNano) ?? 0n,
		attributes: attributes(s.attributes),
		attributeTypes: attributeTypes(s.attributes),
		events: (s.events || []).map((e) => ({
			name: e.name,
			timeUnixNano: toBigInt(e.timeUnixNano) ?? 0n,
			attributes: attributes(e.attributes),
		})),
		links: (s.links || []).map((l) => ({
			traceId: hex(l.traceId),
			spanId: hex(l.spanId),
			attributes: attributes(l.attributes),
		})),
		status: {
			code: (s.status && s.status.code) || 0,
			message: (s.status && s.status.message) || '',
		},
		flags: s.flags || 0,
		resource,
		scope,
	};
}

/**
 * decodeTraces(buffer) -> {
 *   resourceSpans: [{resource: {attributes}, scopeSpans: [{scope: {name, version}, spans}]}],
 *   spans: every span, flattened, each with .resource and .scope
 * }
 * Throws when the buffer is not a valid ExportTraceServiceRequest.
 */
function decodeTraces(buffer) {
	const msg = ExportTraceServiceRequest.decode(buffer);
	const spans = [];
	const resourceSpans = (msg.resourceSpans || []).map((rs) => {
		const resource = { attributes: attributes(rs.resource && rs.resource.attributes) };
		return {
			resource,
			scopeSpans: (rs.scopeSpans || []).map((ss) => {
				const scope = { name: (ss.scope && ss.scope.name) || '', version: (ss.scope && ss.scope.version) || '' };
				const list = (ss.spans || []).map((s) => span(s, resource, scope));
				spans.push(...list);
				return { scope, spans: list };
			}),
		};
	});
	return { resourceSpans, spans };
}

/** Encoded ExportTraceServiceResponse, optionally with partial_success. */
function encodeTraceResponse(partialSuccess) {
	const body = {};
	if (partialSuccess) {
		body.partialSuccess = {
			rejectedSpans: partialSuccess.rejected ?? partialSuccess.rejectedSpans ?? 0,
			errorMessage: partialSuccess.message ?? partialSuccess.errorMessage ?? '',
		};
	}
	return Buffer.from(ExportTraceServiceResponse.encode(body).finish());
}

module.exports = {
	root,
	ExportTraceServiceRequest,
	ExportTraceServiceResponse,
	SpanKind,
	StatusCode,
	decodeTraces,
	encodeTraceResponse,
	hex,
};

'use strict';
// The sdk module of Kyma's nodejs26 runtime (the request API): handlers
// `require('sdk')` or `import { ... } from 'sdk'` (modules/sdk re-exports
// this file) for CloudEvents, tracing and the function's metadata. The host
// configures it before the handler loads and runs every call inside
// runCall, so emitCloudEvent and getTracer know the call they are made in
// without being handed the request.

const crypto = require('node:crypto');
const { AsyncLocalStorage } = require('node:async_hooks');
const { buildMessage, post } = require('./event.cjs');
const { mediaType } = require('./express.cjs');
const { decodeAttribute } = require('./body.cjs');
const tracing = require('./tracing.cjs');

let settings = { functionName: '', namespace: '', runtime: 'nodejs26', timeoutSeconds: 180, bodyLimitMB: 1 };

// configure sets what the metadata getters report (the host's config).
function configure(cfg) {
  settings = {
    functionName: cfg.functionName,
    namespace: cfg.namespace,
    runtime: cfg.runtime || 'nodejs26',
    timeoutSeconds: cfg.timeoutSeconds,
    bodyLimitMB: cfg.bodyLimitMB,
  };
}

// calls holds the call a handler runs in: {req, scope}.
const calls = new AsyncLocalStorage();

// runCall runs fn (a handler call) as the call of req, traced by scope
// (undefined when tracing is off).
function runCall(req, scope, fn) {
  return calls.run({ req, scope }, fn);
}

// CloudEvent is what getCloudEvent returns: the attributes as properties
// (ce.type, ce.data, an extension as ce.<name>), frozen, as the cloudevents
// package's CloudEvent that Kyma's runtime returns.
class CloudEvent {
  constructor(attributes, data) {
    for (const [k, v] of Object.entries(attributes)) {
      if (v !== undefined) this[k] = v;
    }
    if (this.id === undefined) this.id = crypto.randomUUID();
    if (this.specversion === undefined) this.specversion = '1.0';
    this.time = this.time === undefined ? new Date().toISOString() : isoTime(this.time);
    if (data !== undefined) this.data = data;
    Object.freeze(this);
  }

  toJSON() {
    const out = { ...this };
    if (Buffer.isBuffer(out.data)) {
      out.data_base64 = out.data.toString('base64');
      delete out.data;
    }
    return out;
  }

  toString() {
    return JSON.stringify(this);
  }
}

function isoTime(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString();
}

// fromStructured reads a structured-mode CloudEvent: the request body,
// parsed by the host as JSON (application/cloudevents+json).
function fromStructured(body) {
  const envelope = typeof body === 'string' || Buffer.isBuffer(body) ? JSON.parse(String(body)) : body;
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) {
    throw new TypeError('a structured CloudEvent is a JSON object');
  }
  const { data, data_base64: base64, ...attributes } = envelope;
  const value = data === undefined && typeof base64 === 'string' ? Buffer.from(base64, 'base64') : data;
  return new CloudEvent(attributes, value);
}

// fromBinary reads a binary-mode CloudEvent: the ce-* headers (ce-id
// required, as the cloudevents package requires it to detect one) and the
// body as the host parsed it (a string body of a JSON type is parsed).
function fromBinary(headers, body) {
  if (headers['ce-id'] === undefined) throw new TypeError('no ce-id header');
  const attributes = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.length > 3 && name.startsWith('ce-')) attributes[name.slice(3)] = decodeAttribute(value);
  }
  if (headers['content-type'] !== undefined) attributes.datacontenttype = headers['content-type'];
  let data = body;
  if (typeof data === 'string') {
    const type = mediaType(headers['content-type']);
    if (type === 'application/json' || type.endsWith('+json')) data = JSON.parse(data);
  }
  return new CloudEvent(attributes, data);
}

// getCloudEvent returns the CloudEvent a request carries, or null when it
// carries none (neither a structured body nor ce-type and ce-source
// headers) or one that cannot be read.
function getCloudEvent(req) {
  const headers = req && req.headers;
  if (!headers) return null;
  const structured = mediaType(headers['content-type']) === 'application/cloudevents+json';
  if (!structured && (headers['ce-type'] === undefined || headers['ce-source'] === undefined)) return null;
  try {
    if (structured) return req.body === undefined ? null : fromStructured(req.body);
    return fromBinary(headers, req.body);
  } catch {
    return null;
  }
}

// contentTypeOf is Kyma's default datacontenttype of an emitted event:
// JSON for an object, text for anything else.
function contentTypeOf(data) {
  if (Buffer.isBuffer(data) || data instanceof Uint8Array) return 'application/octet-stream';
  return data !== null && typeof data === 'object' ? 'application/json' : 'text/plain';
}

// emitCloudEvent publishes a CloudEvent to PUBLISHER_PROXY_ADDRESS with the
// trace context of the call it is made in. It throws a TypeError at once
// for an invalid type, source or attribute name (as the CloudEvent
// constructor does in Kyma's runtime), and returns a promise that resolves
// with the publisher's answer ({status, statusText, headers, data}) on 2xx
// and rejects otherwise (err.response set when the publisher answered).
function emitCloudEvent(type, source, data, optionalAttributes) {
  const attributes = { ...(optionalAttributes || {}) };
  if (attributes.datacontenttype === undefined && data !== undefined) attributes.datacontenttype = contentTypeOf(data);
  const call = calls.getStore();
  const trace = call ? { scope: call.scope, headers: call.req.headers } : {};
  return post(buildMessage(trace, type, source, data, attributes));
}

// currentTracer is the tracer of the call code runs in: a child of its
// server span when tracing is on, else a no-op tracer.
function currentTracer() {
  const call = calls.getStore();
  if (call && call.scope) return call.scope.tracer;
  return tracing.tracer();
}

// tracer is what getTracer returns: it looks the call up on every use, so
// a tracer taken while the module loads works in every call.
const tracer = Object.freeze({
  startSpan(...args) {
    return currentTracer().startSpan(...args);
  },
  startActiveSpan(...args) {
    return currentTracer().startActiveSpan(...args);
  },
});

function getTracer() {
  return tracer;
}

function getFunctionName() {
  return settings.functionName;
}

function getNamespace() {
  return settings.namespace;
}

function getRuntime() {
  return settings.runtime;
}

// getTimeout is the call timeout in seconds (FUNC_TIMEOUT).
function getTimeout() {
  return settings.timeoutSeconds;
}

// getBodySizeLimit is the body limit in MB (FUNC_BODY_MB_LIMIT).
function getBodySizeLimit() {
  return settings.bodyLimitMB;
}

module.exports = {
  configure,
  runCall,
  getCloudEvent,
  emitCloudEvent,
  getTracer,
  getFunctionName,
  getNamespace,
  getRuntime,
  getTimeout,
  getBodySizeLimit,
};

'use strict';
// The event object handed to main(event, context), and emitCloudEvent: a
// binary-mode CloudEvent POSTed to PUBLISHER_PROXY_ADDRESS that carries the
// incoming request's trace context on.

const http = require('node:http');
const crypto = require('node:crypto');

// node:https (and TLS with it) is loaded on the first emit to an https
// publisher: it would add milliseconds to every cold start.
let https;
function httpsModule() {
  if (https === undefined) https = require('node:https');
  return https;
}

// Headers that carry trace context; copied from the incoming request to an
// emitted event when no OpenTelemetry SDK produces a child context.
const TRACE_HEADERS = [
  'traceparent', 'tracestate', 'baggage', 'x-request-id', 'b3',
  'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags',
];

const CE_ATTRIBUTE = /^[a-z0-9]{1,20}$/;

// MAX_HOPS is the largest hop count read from an incoming event: a longer
// count is taken as this, far over the event bridge's hop limit.
const MAX_HOPS = 999999999;

// hopsOf is the hop count (ce-kfnhops) of the event a call handles: 0 for
// a call that is no event or whose count is no number.
function hopsOf(headers) {
  const v = headers && headers['ce-kfnhops'];
  if (typeof v !== 'string' || !/^[0-9]+$/.test(v)) return 0;
  return v.length > 9 ? MAX_HOPS : Number(v);
}

let settings = { publisherAddress: '', publisherToken: '', identityTokenFile: '', timeoutMs: 30000 };
let agents;

function configure(s) {
  settings = { ...settings, ...s };
}

class Event {
  constructor(req, res, tracer, scope) {
    this.data = undefined; // set by fillEvent; declared first for a stable object shape
    this.extensions = { request: req, response: res };
    this.tracer = tracer;
    this[kScope] = scope;
  }
}

const kScope = Symbol('traceScope');

// Methods are getters that return functions bound to this event, so that
// `const { emitCloudEvent } = event` works as it does on Kyma, while events
// that never use them allocate nothing.
Object.defineProperties(Event.prototype, {
  emitCloudEvent: {
    get() {
      return (type, source, data, attributes) => emitCloudEvent(traceOf(this), type, source, data, attributes);
    },
  },
  setResponseHeader: {
    get() {
      const res = this.extensions.response;
      // Kyma's res.set: a Content-Type gets its charset as Express gives it.
      return (key, value) => { res.set(key, value); };
    },
  },
  setResponseContentType: {
    get() {
      const res = this.extensions.response;
      return (type) => { res.type(type); };
    },
  },
  setResponseStatus: {
    get() {
      const res = this.extensions.response;
      return (status) => { res.statusCode = status; };
    },
  },
  // Deprecated in Kyma; kept so that old handlers keep working.
  publishCloudEvent: {
    get() {
      return (ce) => {
        const { type, source, data, ...rest } = ce || {};
        return emitCloudEvent(traceOf(this), type, source, data, rest);
      };
    },
  },
  buildResponseCloudEvent: {
    get() {
      const req = this.extensions.request;
      return (id, type, data) => ({
        type,
        source: req.headers['ce-source'],
        eventtypeversion: req.headers['ce-eventtypeversion'],
        specversion: req.headers['ce-specversion'],
        id,
        data,
        datacontenttype: defaultContentType(data),
      });
    },
  },
});

// traceOf is where an event's emitted events take their trace context
// from: the call's tracing scope, else the incoming request's headers.
function traceOf(event) {
  return { scope: event[kScope], headers: event.extensions.request.headers };
}

function defaultContentType(data) {
  if (data === undefined || data === null) return undefined;
  if (typeof data === 'string') return 'text/plain';
  if (Buffer.isBuffer(data) || data instanceof Uint8Array) return 'application/octet-stream';
  return 'application/json';
}

function encodeData(data, contentType) {
  if (data === undefined || data === null) return undefined;
  if (typeof data === 'string' || Buffer.isBuffer(data) || data instanceof Uint8Array) return data;
  const ct = (contentType || '').toLowerCase();
  if (ct.includes('json') || ct === '') return JSON.stringify(data);
  return String(data);
}

// buildMessage returns the binary-mode CloudEvent headers and body of an
// event emitted in the call that trace describes ({scope, headers}: the
// call's tracing scope, else the incoming request's headers, whose trace
// headers are passed on), one hop further (kfnhops) than the event the
// call handles. It throws a TypeError for an invalid type,
// source or attribute name.
function buildMessage(trace, type, source, data, attributes) {
  if (typeof type !== 'string' || type === '') throw new TypeError('emitCloudEvent: type must be a non-empty string');
  if (typeof source !== 'string' || source === '') throw new TypeError('emitCloudEvent: source must be a non-empty string');
  const headers = {
    'ce-specversion': '1.0',
    'ce-type': type,
    'ce-source': source,
  };
  let contentType;
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null) continue;
    const key = name.toLowerCase();
    if (key === 'specversion' || key === 'type' || key === 'source' || key === 'data') continue;
    if (key === 'datacontenttype') {
      contentType = String(value);
      continue;
    }
    if (!CE_ATTRIBUTE.test(key)) throw new TypeError(`emitCloudEvent: invalid CloudEvent attribute name ${JSON.stringify(name)}`);
    headers[`ce-${key}`] = value instanceof Date ? value.toISOString() : String(value);
  }
  // One hop further than the event the call handles, whatever the handler
  // set: the event bridge refuses events past its hop limit, which ends a
  // function that emits the events it receives.
  headers['ce-kfnhops'] = String(hopsOf(trace.headers) + 1);
  if (headers['ce-id'] === undefined) headers['ce-id'] = crypto.randomUUID();
  if (headers['ce-time'] === undefined) headers['ce-time'] = new Date().toISOString();
  if (contentType === undefined) contentType = defaultContentType(data);
  const body = encodeData(data, contentType);
  if (contentType !== undefined) headers['content-type'] = contentType;
  if (trace.scope) {
    trace.scope.inject(headers);
  } else if (trace.headers) {
    const incoming = trace.headers;
    for (const h of TRACE_HEADERS) {
      if (incoming[h] !== undefined) headers[h] = incoming[h];
    }
  }
  return { headers, body };
}

function agentFor(protocol) {
  if (!agents) agents = {};
  if (!agents[protocol]) {
    agents[protocol] = protocol === 'https:'
      ? new (httpsModule().Agent)({ keepAlive: true })
      : new http.Agent({ keepAlive: true });
  }
  return agents[protocol];
}

// emitCloudEvent resolves with {status, statusText, headers, data} when the
// publisher answers 2xx and rejects with an Error (err.response set when the
// publisher answered) otherwise, an invalid event included.
function emitCloudEvent(trace, type, source, data, attributes) {
  let message;
  try {
    message = buildMessage(trace, type, source, data, attributes);
  } catch (err) {
    return Promise.reject(err);
  }
  return post(message);
}

// identityToken is the pod's identity token (KFN_IDENTITY_TOKEN_FILE),
// read at every emit since the kubelet renews it; '' when there is none.
function identityToken() {
  if (!settings.identityTokenFile) return '';
  try {
    return require('node:fs').readFileSync(settings.identityTokenFile, 'utf8').trim();
  } catch {
    return '';
  }
}

// post sends a message of buildMessage to the publisher; it resolves and
// rejects as emitCloudEvent does.
function post(message) {
  return new Promise((resolve, reject) => {
    if (!settings.publisherAddress) {
      reject(new Error('emitCloudEvent: PUBLISHER_PROXY_ADDRESS is not set'));
      return;
    }
    let url;
    try {
      url = new URL(settings.publisherAddress);
    } catch (err) {
      reject(err);
      return;
    }
    const body = message.body;
    if (body !== undefined) message.headers['content-length'] = Buffer.byteLength(body);
    // The pod's identity goes in Authorization; the publisher's shared
    // token beside it (kfn-publisher-token), or alone in Authorization
    // when there is no identity: the publisher checks both.
    const identity = identityToken();
    if (identity) {
      message.headers.authorization = `Bearer ${identity}`;
      if (settings.publisherToken) message.headers['kfn-publisher-token'] = settings.publisherToken;
    } else if (settings.publisherToken) {
      message.headers.authorization = `Bearer ${settings.publisherToken}`;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      reject(new Error(`emitCloudEvent: PUBLISHER_PROXY_ADDRESS ${url.href} is not an http(s) URL`));
      return;
    }
    const mod = url.protocol === 'https:' ? httpsModule() : http;
    const req = mod.request(url, {
      method: 'POST',
      headers: message.headers,
      agent: agentFor(url.protocol),
      timeout: settings.timeoutMs,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const response = {
          status: res.statusCode,
          statusText: res.statusMessage,
          headers: res.headers,
          data: Buffer.concat(chunks).toString('utf8'),
        };
        if (res.statusCode >= 200 && res.statusCode < 300) {
          resolve(response);
          return;
        }
        const err = new Error(`emitCloudEvent: publisher answered ${res.statusCode} ${res.statusMessage}: ${response.data.slice(0, 512)}`);
        err.response = response;
        reject(err);
      });
      res.on('error', (err) => reject(new Error(`emitCloudEvent: read publisher response: ${err.message}`)));
    });
    req.on('timeout', () => req.destroy(new Error(`timed out after ${settings.timeoutMs} ms`)));
    req.on('error', (err) => reject(new Error(`emitCloudEvent: POST ${url.href}: ${err.message}`)));
    req.end(body);
  });
}

module.exports = { Event, configure, buildMessage, post, TRACE_HEADERS };

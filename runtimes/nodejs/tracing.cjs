'use strict';
// Tracing, as Kyma's Node.js runtimes have it: with the OpenTelemetry SDK
// (the runtime images ship it next to the host; kfn dev ships none), every
// call runs in a server span, child of the incoming W3C or B3 context,
// event.tracer's spans join it, and the handler's own HTTP requests and
// emitted events carry it on (W3C and B3 headers), whether or not spans
// are exported (to TRACE_COLLECTOR_ENDPOINT, when set). Without the SDK,
// event.tracer is a no-op tracer and emitCloudEvent passes the incoming
// trace headers on unchanged.

const path = require('node:path');

const INVALID_CONTEXT = Object.freeze({ traceId: '00000000000000000000000000000000', spanId: '0000000000000000', traceFlags: 0 });

class NoopSpan {
  spanContext() { return INVALID_CONTEXT; }
  setAttribute() { return this; }
  setAttributes() { return this; }
  addEvent() { return this; }
  addLink() { return this; }
  addLinks() { return this; }
  setStatus() { return this; }
  updateName() { return this; }
  recordException() {}
  end() {}
  isRecording() { return false; }
}

const noopSpan = new NoopSpan();

const noopTracer = Object.freeze({
  startSpan() { return noopSpan; },
  startActiveSpan(name, ...args) {
    const fn = args[args.length - 1];
    return typeof fn === 'function' ? fn(noopSpan) : undefined;
  },
});

let otel;
// sdk is the loaded SDK modules (preload), undefined until they are.
let sdk;

function requireOptional(name, depsDir) {
  return require(resolveOptional(name, depsDir));
}

// resolveOptional finds module name next to the host, else in the
// function's dependencies; it throws MODULE_NOT_FOUND when neither has it.
function resolveOptional(name, depsDir) {
  try {
    return require.resolve(name);
  } catch (err) {
    if (!depsDir || err.code !== 'MODULE_NOT_FOUND') throw err;
    return require.resolve(name, { paths: [path.join(depsDir, 'node_modules')] });
  }
}

// SDK_MODULES are the modules tracing needs; preload loads none unless it
// finds them all (a handler's libraries have @opentelemetry/api alone,
// which is then left for the handler to load).
const SDK_MODULES = ['@opentelemetry/api', '@opentelemetry/sdk-trace-base', '@opentelemetry/core', '@opentelemetry/propagator-b3',
  '@opentelemetry/instrumentation', '@opentelemetry/instrumentation-http'];

// preload loads the OpenTelemetry SDK's modules (tens of milliseconds of
// compiling, most of what tracing costs a host to start), from the host's
// own node_modules (the runtime images') or the function's dependencies,
// and prepares what does not depend on the Function. A standby host calls
// it before it listens, so that start costs a woken Function a millisecond
// or so. It returns the reason when the SDK
// cannot be loaded (kfn dev, which ships none: the incoming trace headers
// are then passed on unchanged by emitCloudEvent, and nothing else).
function preload(depsDir, withExporter) {
  if (sdk) return undefined;
  try {
    for (const name of SDK_MODULES) resolveOptional(name, depsDir);
    const load = (name) => requireOptional(name, depsDir);
    sdk = {
      api: load('@opentelemetry/api'),
      base: load('@opentelemetry/sdk-trace-base'),
      core: load('@opentelemetry/core'),
      b3: load('@opentelemetry/propagator-b3'),
      instrumentation: load('@opentelemetry/instrumentation'),
      http: load('@opentelemetry/instrumentation-http'),
    };
    try {
      sdk.contextManager = load('@opentelemetry/context-async-hooks').AsyncLocalStorageContextManager;
    } catch {
      // Without a context manager, spans still nest through event.tracer.
    }
    // The resource's attributes (optional), and the exporter when asked
    // for (a standby host, whose Function may have an endpoint), else
    // loaded by start when an endpoint is set (tens of milliseconds).
    try {
      sdk.resources = load('@opentelemetry/resources');
    } catch {
      sdk.resources = undefined;
    }
    sdk.exporter = () => load('@opentelemetry/exporter-trace-otlp-http');
    if (withExporter) {
      try {
        sdk.exporter = sdk.exporter();
      } catch {
        // start says so if an endpoint asks for it.
      }
    }
    prepare();
    return undefined;
  } catch (err) {
    sdk = undefined;
    return `load OpenTelemetry SDK: ${err.message}`;
  }
}

// prepare sets up what does not depend on the Function (done by preload):
// the propagators (W3C trace context and baggage, B3 multi-header, as
// Kyma's), the context manager, and the instrumentation of outgoing HTTP
// requests (only those: a call's own span is the host's, Scope), whose
// spans come from the global tracer provider start sets.
function prepare() {
  const { api, core, b3, instrumentation, http } = sdk;
  api.propagation.setGlobalPropagator(new core.CompositePropagator({
    propagators: [
      new core.W3CTraceContextPropagator(),
      new core.W3CBaggagePropagator(),
      new b3.B3Propagator({ injectEncoding: b3.B3InjectEncoding.MULTI_HEADER }),
    ],
  }));
  if (sdk.contextManager) api.context.setGlobalContextManager(new sdk.contextManager().enable());
  instrumentation.registerInstrumentations({
    instrumentations: [new http.HttpInstrumentation({ ignoreIncomingRequestHook: () => true })],
  });
  // The core modules the host loaded before are patched on their next
  // require: now, before a handler holds on to their functions.
  require('node:http');
  require('node:https');
}

// start sets up tracing as Kyma's Node.js runtimes do, whether or not
// spans are exported: each call runs in a server span, child of the
// incoming W3C (traceparent) or B3 context; event.tracer's spans are its
// children; a handler's own HTTP requests (http, https: axios and most
// clients; not fetch, as in Kyma) carry the call's context as W3C
// traceparent and B3 x-b3-* headers; a handler's @opentelemetry/api (the
// images' 1.9) sees the call's span. Spans are exported to
// TRACE_COLLECTOR_ENDPOINT only when it is set. After preload, what is
// left is the Function's tracer provider (a millisecond or so). It returns
// an error message when the SDK cannot be loaded and an endpoint was
// configured (without one, a host without the SDK passes trace headers
// through silently).
function start(cfg) {
  if (otel) return undefined;
  const problem = preload(cfg.depsDir, false);
  if (problem) return cfg.traceCollectorEndpoint ? `tracing disabled: ${problem}` : undefined;
  try {
    const { api, base, resources } = sdk;
    const attributes = { 'service.name': cfg.functionName || 'function' };
    if (cfg.namespace) attributes['k8s.namespace.name'] = cfg.namespace;
    let resource;
    if (resources) {
      resource = resources.resourceFromAttributes
        ? resources.resourceFromAttributes(attributes)
        : new resources.Resource(attributes);
    }
    const spanProcessors = [];
    if (cfg.traceCollectorEndpoint) {
      const exporter = typeof sdk.exporter === 'function' ? sdk.exporter() : sdk.exporter;
      spanProcessors.push(new base.BatchSpanProcessor(new exporter.OTLPTraceExporter({ url: cfg.traceCollectorEndpoint }), { scheduledDelayMillis: 1000 }));
    }
    let provider;
    if (typeof base.BasicTracerProvider.prototype.addSpanProcessor === 'function') {
      provider = new base.BasicTracerProvider({ resource });
      for (const p of spanProcessors) provider.addSpanProcessor(p);
    } else {
      provider = new base.BasicTracerProvider({ resource, spanProcessors });
    }
    api.trace.setGlobalTracerProvider(provider);
    otel = { api, provider, tracer: provider.getTracer('io.kfn.runtime'), exporting: spanProcessors.length > 0 };
    return undefined;
  } catch (err) {
    return `tracing disabled: set up OpenTelemetry SDK: ${err.message}`;
  }
}

class Scope {
  constructor(req, path) {
    const { api, tracer } = otel;
    const parent = api.propagation.extract(api.ROOT_CONTEXT, req.headers);
    this.span = tracer.startSpan(`${req.method} ${path}`, {
      kind: api.SpanKind.SERVER,
      attributes: { 'http.request.method': req.method, 'url.path': path },
    }, parent);
    this.ctx = api.trace.setSpan(parent, this.span);
    const ctx = this.ctx;
    this.tracer = {
      startSpan: (name, options, context) => tracer.startSpan(name, options, context || ctx),
      startActiveSpan: (name, ...args) => {
        const fn = args.pop();
        const options = args[0] || {};
        const context = args[1] || ctx;
        return tracer.startActiveSpan(name, options, context, fn);
      },
    };
  }

  inject(headers) {
    otel.api.propagation.inject(this.ctx, headers);
  }

  run(fn) {
    return otel.api.context.with(this.ctx, fn);
  }

  end(status, message) {
    this.span.setAttribute('http.response.status_code', status);
    if (status >= 500 || status === 408) {
      this.span.setStatus({ code: otel.api.SpanStatusCode.ERROR, message });
    }
    this.span.end();
  }
}

// enabled reports whether calls are traced (the SDK is set up).
function enabled() {
  return otel !== undefined;
}

// exporting reports whether spans are exported.
function exporting() {
  return otel !== undefined && otel.exporting;
}

// tracer returns the SDK's tracer when calls are traced, else a no-op
// tracer.
function tracer() {
  return otel ? otel.tracer : noopTracer;
}

// scope returns the request's tracing scope, or undefined when tracing is off.
function scope(req, path) {
  return otel ? new Scope(req, path) : undefined;
}

// shutdown flushes spans not yet exported; it resolves within timeoutMs.
function shutdown(timeoutMs) {
  if (!otel) return Promise.resolve();
  return Promise.race([
    otel.provider.shutdown().catch(() => {}),
    new Promise((resolve) => setTimeout(resolve, timeoutMs).unref()),
  ]);
}

module.exports = { noopTracer, preload, start, enabled, exporting, tracer, scope, shutdown };

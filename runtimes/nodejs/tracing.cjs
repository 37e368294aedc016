'use strict';
// event.tracer and span export. Without TRACE_COLLECTOR_ENDPOINT (or without
// the OpenTelemetry SDK installed) event.tracer is a no-op tracer and the
// incoming trace headers are passed on unchanged by emitCloudEvent. With it,
// the SDK is loaded after the host started listening, so it never delays a
// cold start, and each call runs in a server span that is a child of the
// incoming traceparent.

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

function requireOptional(name, depsDir) {
  try {
    return require(name);
  } catch (err) {
    if (!depsDir || err.code !== 'MODULE_NOT_FOUND') throw err;
    return require(require.resolve(name, { paths: [path.join(depsDir, 'node_modules')] }));
  }
}

// start loads and configures the OpenTelemetry SDK. It returns an error
// message when tracing stays off although an endpoint was configured.
function start(cfg) {
  if (!cfg.traceCollectorEndpoint) return undefined;
  try {
    const load = (name) => requireOptional(name, cfg.depsDir);
    const api = load('@opentelemetry/api');
    const base = load('@opentelemetry/sdk-trace-base');
    const { OTLPTraceExporter } = load('@opentelemetry/exporter-trace-otlp-http');
    const core = load('@opentelemetry/core');
    const attributes = { 'service.name': cfg.functionName || 'function' };
    if (cfg.namespace) attributes['k8s.namespace.name'] = cfg.namespace;
    let resource;
    try {
      const resources = load('@opentelemetry/resources');
      resource = resources.resourceFromAttributes
        ? resources.resourceFromAttributes(attributes)
        : new resources.Resource(attributes);
    } catch {
      resource = undefined;
    }
    const processor = new base.BatchSpanProcessor(
      new OTLPTraceExporter({ url: cfg.traceCollectorEndpoint }),
      { scheduledDelayMillis: 1000 },
    );
    let provider;
    if (typeof base.BasicTracerProvider.prototype.addSpanProcessor === 'function') {
      provider = new base.BasicTracerProvider({ resource });
      provider.addSpanProcessor(processor);
    } else {
      provider = new base.BasicTracerProvider({ resource, spanProcessors: [processor] });
    }
    api.trace.setGlobalTracerProvider(provider);
    api.propagation.setGlobalPropagator(new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }));
    try {
      const { AsyncLocalStorageContextManager } = load('@opentelemetry/context-async-hooks');
      api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    } catch {
      // Without a context manager, spans still nest through event.tracer.
    }
    otel = { api, provider, tracer: provider.getTracer('io.kfn.runtime') };
    return undefined;
  } catch (err) {
    return `tracing disabled: load OpenTelemetry SDK: ${err.message}`;
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

// enabled reports whether spans are being exported.
function enabled() {
  return otel !== undefined;
}

// tracer returns the SDK's tracer when spans are exported, else a no-op
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

module.exports = { noopTracer, start, enabled, tracer, scope, shutdown };

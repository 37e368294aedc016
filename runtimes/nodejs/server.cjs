'use strict';
// kfn Node.js function host: serves a Kyma handler over HTTP, main(event,
// context), or nodejs26's main(req, res) with the sdk module (the request
// API). Node's own http module only; see runtimes/README.md for the
// contract (environment, routes, signals).

const http = require('node:http');
const config = require('./config.cjs');
const { Request, Response, withCharset } = require('./express.cjs');
const { hasBody, readBody, fillEvent, requestBody } = require('./body.cjs');
const { Event, configure: configureEvents } = require('./event.cjs');
const metrics = require('./metrics.cjs');
const tracing = require('./tracing.cjs');
const { loadHandler } = require('./load.cjs');
const sdk = require('./sdk.cjs');
const requestlog = require('./requestlog.cjs');
const standbyHost = require('./standby.cjs');
// The dependency cache's client, loaded when a standby host first needs it.
const depcache = () => require('./depcache.cjs');
const Module = require('node:module');
const path = require('node:path');

// The last line of a host whose dependency set is not in the cache, and
// its exit code (runtimes.DependencyMissingMessage, DependencyMissingExit).
const DEPENDENCY_MISSING_MESSAGE = 'kfn: dependency set not in the cache: ';
const DEPENDENCY_MISSING_EXIT = 3;

function fatal(err) {
  console.error(`kfn: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
}

const EMPTY = Buffer.alloc(0);

function routeIs(url, route) {
  return url.startsWith(route) && (url.length === route.length || url.charCodeAt(route.length) === 63 /* ? */);
}

function pathOf(url) {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

function errorText(err) {
  return typeof err === 'string' ? err : 'Internal server error';
}

// writeResult turns a handler's return value into the response the way Kyma
// does: nothing (or any falsy value) gives an empty body, a string is the
// body, a Buffer is sent as is, anything else is sent as JSON.
function writeResult(res, value) {
  if (res.headersSent) {
    res.end();
    return;
  }
  if (!value) {
    res.end();
    return;
  }
  if (typeof value === 'string') {
    res.end(value);
    return;
  }
  if (typeof value === 'object') {
    if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
      res.end(value);
      return;
    }
    const body = JSON.stringify(value);
    // Kyma's res.json: a Content-Type the handler set gets charset utf-8.
    res.setHeader('Content-Type', res.hasHeader('content-type') ? withCharset(res.getHeader('content-type')) : 'application/json; charset=utf-8');
    res.end(body);
    return;
  }
  res.end(String(value));
}

// sendFailure answers a failed call 500 as Kyma's runtimes do: the event
// API (nodejs20-24) with res.end, which adds no Content-Type (one the
// handler set stays); the request API (nodejs26) with Express's send, which
// makes an unset type HTML.
function sendFailure(res, message, api) {
  res.statusCode = 500;
  if (api === 'request' && !res.hasHeader('content-type')) res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.end(message);
}

function sendError(res, status, message, close) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  if (close) res.setHeader('Connection', 'close');
  res.end(message);
}

// NOT_LOADED is Kyma's answer to a call when the handler could not be loaded.
const NOT_LOADED = 'User function not loaded';

// isReadyProbe reports whether a /healthz request asks for readiness
// (/healthz?ready): 200 only once the handler is loaded. Plain /healthz is
// 200 while the host serves, loaded or not, as in Kyma.
function isReadyProbe(url) {
  const q = url.indexOf('?');
  return q !== -1 && new URLSearchParams(url.slice(q + 1)).has('ready');
}

// serve serves the handler; handler is null when it could not be loaded
// (loadError says why): the host then keeps serving, as Kyma's does, and
// answers every call 500 "User function not loaded" and readiness 500.
// FUNCTION_HEADER names the Function (namespace/name) on health answers.
const FUNCTION_HEADER = 'X-Kfn-Function';

//
// standby (a host started with KFN_STANDBY_TOKEN_SHA256) serves no Function
// until a caller with the token loads one (standby.cjs): health says
// "standby", readiness 503, every other request 503, and POST
// /_kfn/specialize loads the Function it carries; from then on the host is
// that Function's, and that path is the Function's like any other.
function serve(cfg, handler, loadError, standby) {
  configureEvents({ publisherAddress: cfg.publisherAddress, publisherToken: cfg.publisherToken, identityTokenFile: cfg.identityTokenFile, timeoutMs: cfg.timeoutMs });
  sdk.configure(cfg);
  // Calls in progress, in start order. Every call gets the same timeout, so
  // this is also deadline order: one timer, set for the oldest call, cuts
  // all of them, instead of a timer per call.
  const inFlight = new Set();
  let sweepTimer = null;
  let draining = false;
  let server;

  function scheduleSweep() {
    if (sweepTimer !== null || inFlight.size === 0) return;
    const oldest = inFlight.values().next().value;
    sweepTimer = setTimeout(sweep, Math.max(1, Math.ceil(oldest.deadline - performance.now())));
  }

  function sweep() {
    sweepTimer = null;
    const now = performance.now();
    for (const call of inFlight) {
      if (call.deadline > now) break;
      onTimeout(call); // removes call from inFlight
    }
    scheduleSweep();
  }

  // Connections that have not carried a request yet. Node's
  // closeIdleConnections leaves them open (a client may have dialled for a
  // request it then cancelled), and server.close would wait for them until
  // the headers timeout; while draining they are closed too.
  const fresh = new Set();
  const closeIdle = () => {
    server.closeIdleConnections();
    if (draining) for (const socket of fresh) socket.destroy();
  };

  class Call {
    constructor(req, res, scope) {
      this.req = req;
      this.res = res;
      this.scope = scope;
      this.start = performance.now();
      this.deadline = this.start + cfg.timeoutMs;
      this.done = false;
      this.timedOut = false;
      inFlight.add(this);
      if (sweepTimer === null) scheduleSweep();
      // send is Kyma's third handler argument: sendResponse(body, status, headers).
      // As there, a status without a body sends the status text.
      this.send = (body, status, headers) => {
        if (headers) for (const k of Object.keys(headers)) res.set(k, headers[k]);
        if (status) res.statusCode = status;
        if (!body && status) {
          // Express's sendStatus: the status text, as plain text.
          if (!res.headersSent) res.setHeader('Content-Type', 'text/plain; charset=utf-8');
          this.finish(http.STATUS_CODES[status] || String(status));
          return;
        }
        this.finish(body);
      };
    }

    settle() {
      if (this.done) return false;
      this.done = true;
      inFlight.delete(this);
      metrics.observe((performance.now() - this.start) / 1000);
      if (draining) setImmediate(closeIdle);
      return true;
    }

    finish(value) {
      if (!this.settle()) return;
      const res = this.res;
      if (!res.writableEnded) {
        try {
          writeResult(res, value);
        } catch (err) {
          metrics.failure();
          console.error('kfn: function result could not be sent:', err);
          if (!res.headersSent) sendError(res, 500, 'Internal server error');
          else res.destroy();
        }
      }
      if (this.scope) this.scope.end(res.statusCode);
    }

    // ended settles a request-API call once its response is complete, or
    // its connection closed: the handler writes the answer itself.
    ended() {
      if (!this.settle()) return;
      if (this.scope) this.scope.end(this.res.statusCode);
    }

    fail(err) {
      if (!this.settle()) {
        // A request-API handler may fail after it answered (or after its
        // 408): counted and logged all the same, as Kyma's runtime does.
        if (cfg.api === 'request' && !this.timedOut) {
          metrics.failure();
          console.error('kfn: function failed:', err);
        }
        return;
      }
      metrics.failure();
      console.error('kfn: function failed:', err);
      const res = this.res;
      if (!res.headersSent) sendFailure(res, errorText(err), cfg.api);
      else if (!res.writableEnded) res.destroy();
      if (this.scope) this.scope.end(500, String(err && err.message ? err.message : err));
    }
  }

  function onTimeout(call) {
    if (!call.settle()) return;
    call.timedOut = true;
    metrics.failure();
    const res = call.res;
    console.error(`kfn: function timed out after ${cfg.timeoutSeconds}s: ${call.req.method} ${pathOf(call.req.url)}`);
    res.on('error', () => {});
    if (!res.headersSent) sendError(res, 408, 'Request Timeout');
    else if (!res.writableEnded) res.destroy();
    if (call.scope) call.scope.end(408, 'timeout');
  }

  // notLoaded answers a call to a host whose handler could not be loaded
  // as Kyma's runtime does: Express's send of the text, so HTML.
  function notLoaded(res) {
    metrics.call();
    metrics.failure();
    res.statusCode = 500;
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end(NOT_LOADED);
  }

  // invoke calls main(event, context) and answers with its result.
  function invoke(req, res, buf) {
    if (handler === null) {
      notLoaded(res);
      return;
    }
    const scope = tracing.enabled() ? tracing.scope(req, pathOf(req.url)) : undefined;
    const event = new Event(req, res, scope ? scope.tracer : tracing.noopTracer, scope);
    try {
      fillEvent(event, req, buf);
    } catch (err) {
      if (scope) scope.end(err.status || 500);
      sendError(res, err.status || 500, err.message);
      return;
    }
    const context = {
      'function-name': cfg.functionName,
      runtime: cfg.runtime,
      namespace: cfg.namespace,
      timeout: cfg.timeoutSeconds,
      'body-size-limit': cfg.bodyLimitMB,
    };
    metrics.call();
    const call = new Call(req, res, scope);
    let out;
    try {
      out = scope ? scope.run(() => handler(event, context, call.send)) : handler(event, context, call.send);
    } catch (err) {
      call.fail(err);
      return;
    }
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      out.then((value) => call.finish(value), (err) => call.fail(err));
    } else {
      call.finish(out);
    }
  }

  // invokeRequest calls a request-API handler, main(req, res), which
  // answers through res; its return value is not used, a throw or a
  // rejection is a 500 unless it already answered.
  function invokeRequest(req, res, buf) {
    if (handler === null) {
      notLoaded(res);
      return;
    }
    try {
      req.body = requestBody(req, buf);
    } catch (err) {
      sendError(res, err.status || 500, err.message);
      return;
    }
    const scope = tracing.enabled() ? tracing.scope(req, pathOf(req.url)) : undefined;
    metrics.call();
    const call = new Call(req, res, scope);
    const ended = () => call.ended();
    res.once('finish', ended);
    res.once('close', ended);
    const run = scope ? () => scope.run(() => handler(req, res)) : () => handler(req, res);
    let out;
    try {
      out = sdk.runCall(req, scope, run);
    } catch (err) {
      call.fail(err);
      return;
    }
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      out.then(undefined, (err) => call.fail(err));
    }
  }

  const dispatch = cfg.api === 'request' ? invokeRequest : invoke;
  // The health answer names the Function, so that a probe of an address
  // (the event bridge's early ready probe) knows it reached this
  // Function's pod and not another that took over the address.
  let functionID = `${cfg.namespace}/${cfg.functionName}`;
  // loading is true while a specialize request loads its Function.
  let loading = false;
  // spent says why a specialize request failed after the host took its
  // Function's files: the host then serves no Function at all.
  let spent = '';
  // preparing settles when a prepare request's fetch ended; prepared is
  // the dependency set it left in the dependency directory ({runtime,
  // hash, dir}), null when none.
  let preparing = null;
  let prepared = null;

  function onStandby(req, res) {
    const method = req.method;
    const url = req.url;
    if ((method === 'GET' || method === 'HEAD') && routeIs(url, '/healthz')) {
      if (draining) sendError(res, 503, 'draining', true);
      else if (isReadyProbe(url)) sendError(res, 503, 'standby: no Function loaded');
      else res.end('standby');
      return;
    }
    const prepare = method === 'POST' && pathOf(url) === standbyHost.PREPARE_PATH;
    if (!prepare && (method !== 'POST' || pathOf(url) !== standbyHost.SPECIALIZE_PATH)) {
      res.setHeader('Retry-After', '1');
      sendError(res, 503, 'standby: no Function loaded');
      return;
    }
    if (!standbyHost.authorized(req.headers.authorization, cfg.standbyTokenHash)) {
      res.setHeader('WWW-Authenticate', 'Bearer');
      sendError(res, 401, `${prepare ? 'prepare' : 'specialize'}: the standby token is required`);
      return;
    }
    if (prepare) {
      onPrepare(req, res);
      return;
    }
    if (loading) {
      sendError(res, 409, 'specialize: a Function is being loaded');
      return;
    }
    if (spent) {
      sendError(res, 409, `specialize: this host failed to load a Function and serves none: ${spent}`);
      return;
    }
    loading = true;
    const arrived = performance.now();
    readBody(req, standbyHost.MAX_BYTES, (err, buf) => {
      if (err) {
        loading = false;
        sendError(res, err.status, err.message, err.close);
        return;
      }
      specialize(res, buf, arrived);
    });
  }

  // configWith is the host's configuration with a request's environment
  // over its own (no longer on standby); it throws a 400 error when it is
  // refused.
  function configWith(env, what) {
    try {
      return config.load({ ...process.env, ...env, KFN_STANDBY_TOKEN_SHA256: '' });
    } catch (err) {
      throw Object.assign(new Error(`${what}: ${err.message}`), { status: 400 });
    }
  }

  // onPrepare fetches the dependency set a prepare request names into the
  // dependency directory, once per host and before any Function is
  // loaded: 200 when it is there, 404 when the cache has none, 409 when
  // the host prepared or loads already.
  function onPrepare(req, res) {
    if (loading || spent || preparing || prepared) {
      sendError(res, 409, 'prepare: this host prepared or loads a Function already');
      return;
    }
    let settle;
    preparing = new Promise((resolve) => { settle = resolve; });
    const done = (status, message) => {
      preparing = null;
      settle();
      if (status === 200) res.end(message);
      else sendError(res, status, message);
    };
    readBody(req, standbyHost.PREPARE_MAX_BYTES, (err, buf) => {
      if (err) {
        preparing = null;
        settle();
        sendError(res, err.status, err.message, err.close);
        return;
      }
      let spec;
      let next;
      try {
        spec = standbyHost.parsePreparation(buf);
        next = configWith(spec.env, 'prepare');
        checkDependencies(spec.dependencies, next, 'prepare');
      } catch (e) {
        done(e.status || 500, e.status ? e.message : `prepare: ${e.message}`);
        return;
      }
      const d = spec.dependencies;
      const start = performance.now();
      depcache().fetch({ base: next.dependencyCache, runtime: d.runtime, hash: d.hash, dir: next.depsDir, tokenFile: next.identityTokenFile }).then((found) => {
        if (!found) {
          done(404, `prepare: dependencies ${d.runtime}/${d.hash} are not in the dependency cache`);
          return;
        }
        prepared = { runtime: d.runtime, hash: d.hash, dir: next.depsDir };
        console.log(`kfn: dependencies ${d.runtime}/${d.hash.slice(0, 12)} prepared from the cache in ${Math.round(performance.now() - start)} ms`);
        done(200, `prepared ${d.runtime}/${d.hash}`);
      }, (e) => done(500, `prepare: dependencies: ${e.message}`));
    });
  }

  // specialize loads the Function a specialize request carries: checks
  // its environment against the host's configuration, writes its files,
  // takes its environment and loads its handler. A request refused before
  // the files are written leaves the host on standby. arrived is when the
  // request did (performance.now()), for the log line that says how long
  // the load took.
  function specialize(res, buf, arrived) {
    let spec;
    let next;
    try {
      spec = standbyHost.parse(buf);
      next = configWith(spec.env, 'specialize');
      if (next.api !== cfg.api) throw Object.assign(new Error('specialize: the handler API is the host\'s'), { status: 400 });
      if (spec.dependencies) checkDependencies(spec.dependencies, next);
      standbyHost.writeFiles(next.functionDir, spec.files);
    } catch (err) {
      loading = false;
      sendError(res, err.status || 500, err.status ? err.message : `specialize: ${err.message}`);
      return;
    }
    if (!spec.dependencies) {
      take(res, spec, next, arrived);
      return;
    }
    const d = spec.dependencies;
    const start = performance.now();
    // A prepare request under way ends first; what it left is taken when
    // it is this Function's set, and cleared otherwise.
    Promise.resolve(preparing).then(() => {
      if (prepared && prepared.runtime === d.runtime && prepared.hash === d.hash && prepared.dir === next.depsDir) return 'prepared';
      if (prepared) depcache().emptyDir(prepared.dir);
      prepared = null;
      return depcache().fetch({ base: next.dependencyCache, runtime: d.runtime, hash: d.hash, dir: next.depsDir, tokenFile: next.identityTokenFile });
    }).then((found) => {
      if (!found) throw new Error(`dependencies ${d.runtime}/${d.hash} are not in the dependency cache (404)`);
      const how = found === 'prepared' ? 'prepared before' : `from the cache in ${Math.round(performance.now() - start)} ms`;
      console.log(`kfn: dependencies ${d.runtime}/${d.hash.slice(0, 12)} ${how}`);
      // require() of the Function's dependencies before the libraries
      // of the image, as NODE_PATH has them in a Deployment's pod.
      const own = path.join(next.depsDir, 'node_modules');
      process.env.NODE_PATH = [own, ...(process.env.NODE_PATH || '').split(path.delimiter).filter((p) => p && p !== own)].join(path.delimiter);
      if (typeof Module._initPaths === "function") Module._initPaths();
      take(res, spec, next, arrived);
    }).catch((err) => {
      spent = `dependencies: ${err.message}`;
      loading = false;
      console.error(`kfn: specialize: ${spent}`);
      sendError(res, 500, `specialize: ${spent}`);
    });
  }

  // checkDependencies refuses (400) a Function whose dependencies the host
  // cannot fetch: another runtime's, or no cache or dependency directory.
  function checkDependencies(d, next, what = 'specialize') {
    const refuse = (message) => Object.assign(new Error(`${what}: dependencies: ${message}`), { status: 400 });
    if (d.runtime !== cfg.runtime) throw refuse(`runtime ${d.runtime}, this host runs ${cfg.runtime || 'none'}`);
    if (!next.dependencyCache) throw refuse('no KFN_DEPENDENCY_CACHE to fetch them from');
    if (!next.depsDir) throw refuse('no KFN_DEPS_DIR to unpack them into');
  }

  // take makes the host the Function's: its environment, then its handler.
  function take(res, spec, next, arrived) {
    Object.assign(process.env, spec.env);
    // The token's hash stays: requests during the load are still asked
    // for it (and then refused 409).
    Object.assign(cfg, next, { standbyTokenHash: cfg.standbyTokenHash });
    configureEvents({ publisherAddress: cfg.publisherAddress, publisherToken: cfg.publisherToken, identityTokenFile: cfg.identityTokenFile, timeoutMs: cfg.timeoutMs });
    sdk.configure(cfg);
    functionID = `${cfg.namespace}/${cfg.functionName}`;
    const loadStart = performance.now();
    // Before the handler loads, so that its requests carry the trace (the
    // SDK was loaded on standby: this is its set-up only).
    startTracing(cfg);
    loadHandler(cfg).then((h) => {
      handler = h;
      loadError = '';
    }, (err) => {
      console.error(`kfn: ${NOT_LOADED}: ${err && err.stack ? err.stack : err}`);
      handler = null;
      loadError = oneLine(err);
    }).then(() => {
      standby = false;
      loading = false;
      if (handler === null) {
        sendError(res, 500, `${NOT_LOADED}: ${loadError}`);
        return;
      }
      const now = performance.now();
      console.log(`kfn: function ${functionID} loaded on standby host in ${ms(now - arrived)} ms (its handler in ${ms(now - loadStart)} ms)`);
      res.setHeader(FUNCTION_HEADER, functionID);
      res.end(`loaded ${functionID}`);
    });
  }

  function onRequest(req, res) {
    fresh.delete(req.socket);
    if (cfg.requestLog) requestlog.watch(req, res);
    if (standby) {
      onStandby(req, res);
      return;
    }
    const method = req.method;
    const url = req.url;
    if (method === 'GET' || method === 'HEAD') {
      if (routeIs(url, '/healthz')) {
        if (draining) sendError(res, 503, 'draining', true);
        else if (handler === null && isReadyProbe(url)) sendError(res, 500, `${NOT_LOADED}: ${loadError}`);
        else {
          res.setHeader(FUNCTION_HEADER, functionID);
          res.end('OK');
        }
        return;
      }
      if (routeIs(url, '/metrics')) {
        res.setHeader('Content-Type', 'text/plain; version=0.0.4; charset=utf-8');
        res.end(metrics.render());
        return;
      }
      if (routeIs(url, '/favicon.ico')) {
        res.statusCode = 204;
        res.end();
        return;
      }
    }
    res.setHeader('Access-Control-Allow-Origin', '*');
    if (method === 'OPTIONS') {
      // Every OPTIONS is answered by the host, a CORS preflight or not, and
      // never reaches the handler, as Kyma's Node.js runtimes do
      // (components/runtimes/nodejs*/server.mjs); the requested method and
      // headers are allowed when asked for (Kyma writes "undefined" when
      // they are not).
      const m = req.headers['access-control-request-method'];
      if (m !== undefined) res.setHeader('Access-Control-Allow-Methods', m);
      const h = req.headers['access-control-request-headers'];
      if (h !== undefined) res.setHeader('Access-Control-Allow-Headers', h);
      res.end();
      return;
    }
    if (draining) res.setHeader('Connection', 'close');
    if (!hasBody(req)) {
      // Content-Length: 0 is an empty body, not no body (as body-parser saw it).
      dispatch(req, res, req.headers['content-length'] === '0' ? EMPTY : undefined);
      return;
    }
    readBody(req, cfg.bodyLimitBytes, (err, buf) => {
      if (err) sendError(res, err.status, err.message, err.close);
      else dispatch(req, res, buf);
    });
  }

  // Headers up to 64 KiB (Node's default is 16 KiB): the event bridge
  // stores events with up to 32 KiB of attributes, and delivers them as
  // headers beside the trace context (eventstore.MaxAttributeBytes).
  server = http.createServer({ IncomingMessage: Request, ServerResponse: Response, maxHeaderSize: 64 * 1024 }, onRequest);
  // Idle keep-alive connections stay open longer than the usual client idle
  // timeouts (Go's 90 s), so a client never sends on a connection the host is
  // closing.
  server.keepAliveTimeout = 120000;
  server.headersTimeout = 125000;
  server.on('error', fatal);
  server.on('connection', (socket) => {
    fresh.add(socket);
    socket.once('close', () => fresh.delete(socket));
  });

  function drain(signal) {
    if (draining) return;
    draining = true;
    console.log(`kfn: ${signal}: draining ${inFlight.size} in-flight request(s)`);
    for (const call of inFlight) {
      if (!call.res.headersSent) call.res.setHeader('Connection', 'close');
    }
    server.close(() => {
      tracing.shutdown(2000).then(() => process.exit(0));
    });
    closeIdle();
    setTimeout(() => {
      console.error('kfn: drain did not finish in time, exiting');
      process.exit(1);
    }, cfg.timeoutMs + 5000).unref();
  }
  process.removeListener('SIGTERM', exitBeforeServing);
  process.removeListener('SIGINT', exitBeforeServing);
  process.on('SIGTERM', () => drain('SIGTERM'));
  process.on('SIGINT', () => drain('SIGINT'));

  const onListening = () => {
    if (standby) {
      console.log(`kfn: standby host on port ${server.address().port}: waiting for a Function`);
      return;
    }
    if (handler === null) {
      console.error(`kfn: function ${cfg.functionName || '(unnamed)'} serving on port ${server.address().port} without its handler: calls are answered 500 "${NOT_LOADED}"`);
    } else {
      console.log(`kfn: function ${cfg.functionName || '(unnamed)'} ready on port ${server.address().port}`);
    }
  };
  if (cfg.listenFd !== undefined) server.listen({ fd: cfg.listenFd }, onListening);
  else server.listen(cfg.port, onListening);
}

// ms rounds a duration in milliseconds to a tenth, for log lines.
function ms(d) {
  return Math.round(d * 10) / 10;
}

// warmFetch makes one request with fetch to a server of its own on
// 127.0.0.1, then closes it; it resolves whatever happens (a host without
// fetch, or where nothing can listen, still starts).
function warmFetch() {
  if (typeof fetch !== 'function') return Promise.resolve();
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => res.end('ok'));
    const done = () => {
      srv.close();
      if (typeof srv.closeAllConnections === 'function') srv.closeAllConnections();
      resolve();
    };
    srv.on('error', done);
    srv.listen(0, '127.0.0.1', () => {
      fetch(`http://127.0.0.1:${srv.address().port}/`).then((r) => r.arrayBuffer()).catch(() => {}).finally(done);
    });
  });
}

// exitBeforeServing ends the host on a signal that comes before it serves
// (while it loads its handler, fetches its dependencies or warms up on
// standby): there is nothing to drain yet. Without it the signal would be
// lost: the host is PID 1 in its container, and PID 1 ignores a signal it
// has no handler for, so a pod deleted while its host started (a Function
// scaled to zero a second after a new pod started, say) lived on until the
// kubelet's SIGKILL at the end of its grace period. serve replaces it with
// the drain.
function exitBeforeServing(signal) {
  console.log(`kfn: ${signal} before serving: exiting`);
  process.exit(0);
}

function main() {
  process.on('SIGTERM', exitBeforeServing);
  process.on('SIGINT', exitBeforeServing);
  let cfg;
  try {
    cfg = config.load();
  } catch (err) {
    fatal(err);
  }
  // A handler's asynchronous callbacks may throw where no try/catch reaches;
  // the host logs and keeps serving, as Kyma's runtime does.
  process.on('uncaughtException', (err) => console.error('kfn: uncaught exception in function:', err));
  process.on('unhandledRejection', (err) => console.error('kfn: unhandled rejection in function:', err));
  if (cfg.standbyTokenHash) {
    // What a woken Function would otherwise load on its first call is
    // loaded before the host listens, so that a standby pod is warm once
    // its startup probe passes and the pool gives it out: a specialize
    // request never waits behind it (under a Function's CPU limit, 200m
    // for preset S, a pod given out a second after it started could still
    // be doing it). fetch is loaded on first use (tens of milliseconds, more
    // under a CPU limit; about 10 MiB more memory), and its first HTTP
    // request compiles its HTTP parser (WebAssembly): one request to a
    // server of the host's own on 127.0.0.1 does both now (a woken
    // handler's first fetch took 60-120 ms on the test node without it);
    // the dependency cache's client is run once (depcache.warm) for a
    // Function with dependencies.
    // The tracing SDK is loaded too (set up once a Function is given).
    tracing.preload(undefined, true);
    Promise.all([warmFetch(), require('./depcache.cjs').warm()]).then(() => serve(cfg, null, '', true));
    return;
  }
  // A handler that cannot be loaded (syntax error, missing module, no such
  // function) does not stop the host: it serves without it, as Kyma's
  // does, and its readiness says so (runtimes/README.md).
  fetchDependencies(cfg).then(() => {
    startTracing(cfg);
    return loadHandler(cfg);
  }).then((handler) => serve(cfg, handler, ''), (err) => {
    console.error(`kfn: ${NOT_LOADED}: ${err && err.stack ? err.stack : err}`);
    serve(cfg, null, oneLine(err));
  });
}

// startTracing sets up tracing (tracing.start) before a handler loads, so
// that the requests it makes carry the trace from its first call: the SDK's
// load is part of a new pod's start (Kyma's runtimes load it at start too),
// a standby host loaded it before it was given a Function.
function startTracing(cfg) {
  const problem = tracing.start(cfg);
  if (problem) console.error(`kfn: ${problem}`);
  else if (tracing.exporting()) console.log(`kfn: tracing: exporting spans to ${cfg.traceCollectorEndpoint}`);
}

// fetchDependencies fetches the Function's dependency set from the cache
// into its dependency directory when the pod has no install container
// (KFN_DEPENDENCY_HASH). A set the cache does not have ends the host with
// DEPENDENCY_MISSING_EXIT, its last line saying so (the container's
// termination message, by which the controller goes back to installing);
// a cache that cannot be read ends it with 1, and the kubelet starts it
// again.
function fetchDependencies(cfg) {
  if (!cfg.dependencyHash) return Promise.resolve();
  const set = `${cfg.runtime}/${cfg.dependencyHash}`;
  const start = performance.now();
  const o = { base: cfg.dependencyCache, runtime: cfg.runtime, hash: cfg.dependencyHash, dir: cfg.depsDir, tokenFile: cfg.identityTokenFile };
  return depcache().fetchAtStart(o, (msg) => console.log(`kfn: ${msg}`)).then((found) => {
    if (!found) {
      console.error(`${DEPENDENCY_MISSING_MESSAGE}${set}`);
      process.exit(DEPENDENCY_MISSING_EXIT);
    }
    console.log(`kfn: dependencies ${cfg.runtime}/${cfg.dependencyHash.slice(0, 12)} from the cache in ${Math.round(performance.now() - start)} ms`);
  }, (err) => {
    console.error(`kfn: dependencies ${set}: the cache could not be read: ${err.message}`);
    process.exit(1);
  });
}

// oneLine is the first line of an error's text, for the readiness answer:
// "file:line: Name: message" for a load error that names its place in the
// handler's file (load.cjs), else "Name: message".
function oneLine(err) {
  let text = String(err && err.name && err.message !== undefined ? `${err.name}: ${err.message}` : err);
  const at = err && typeof err.message === 'string' ? /^(\/[^:\n]+:\d+): ([^]*)$/.exec(err.message) : null;
  if (at) text = `${at[1]}: ${err.name}: ${at[2]}`;
  const nl = text.indexOf('\n');
  return nl === -1 ? text : text.slice(0, nl);
}

main();

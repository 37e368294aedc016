// Contract test function: one route per point of the handler contract.
// The Python twin in ../../python/contract/handler.py answers the same way.
const fs = require('node:fs');
const path = require('node:path');

function describe(data) {
  if (data === undefined || data === null) return { kind: 'none', data: null };
  if (Buffer.isBuffer(data)) return { kind: 'bytes', data: data.toString('utf8') };
  if (typeof data === 'string') return { kind: 'text', data };
  return { kind: 'json', data };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = {
  main: function (event, context, sendResponse) {
    const req = event.extensions.request;
    const res = event.extensions.response;
    if (req.path.startsWith('/params/')) return { params: req.params.path };
    if (req.path === '/ctype') {
      if (req.query.send) return sendResponse('hello', 200, { 'Content-Type': req.query.t });
      event.setResponseHeader('Content-Type', req.query.t);
      return req.query.obj ? { a: 1 } : 'hi';
    }
    if (req.path === '/proxy') return { protocol: req.protocol, secure: req.secure, ips: req.ips, hostname: req.hostname };
    if (req.path === '/query') return { query: req.query, noPrototype: Object.getPrototypeOf(req.query) === null };
    if (req.path === '/own') return { own: event.data.hasOwnProperty('a'), data: event.data };
    switch (req.path) {
      case '/hello':
        return 'Hello ' + process.env.PERSON_NAME;
      case '/echo': {
        const ce = {};
        for (const k of Object.keys(event)) if (k.startsWith('ce-')) ce[k] = event[k];
        return {
          ...describe(event.data),
          ce,
          method: req.method,
          path: req.path,
          query: { name: req.query.name },
          context,
          header: req.get('X-Test') || null,
        };
      }
      case '/method':
        return req.method;
      case '/status':
        event.setResponseStatus(201);
        event.setResponseHeader('X-Custom', 'yes');
        event.setResponseContentType('application/x-kfn');
        return 'created';
      case '/none':
        return undefined;
      case '/object':
        return { ok: true };
      case '/throw':
        throw new Error('boom');
      case '/reject':
        return Promise.reject(new Error('boom'));
      case '/throw-string':
        throw 'custom failure';
      case '/sleep':
        return sleep(Number(req.query.ms)).then(() => 'slept');
      case '/stray-errors':
        // Errors no try/catch of the host can reach.
        setTimeout(() => { throw new Error('late boom'); }, 0);
        Promise.reject(new Error('unhandled boom'));
        return 'ok';
      case '/bad-header':
        event.setResponseHeader('X-Bad', 'a\r\nInjected: yes');
        return 'not sent';
      case '/meet': {
        // Two calls meet only if they run at the same time: each marks its
        // arrival and waits (up to 4 s) for the other's mark.
        const dir = process.env.MARKER_DIR;
        const { me, other } = req.query;
        fs.writeFileSync(path.join(dir, me), '');
        const until = Date.now() + 4000;
        return new Promise((resolve) => {
          const check = () => {
            if (fs.existsSync(path.join(dir, other))) resolve('met');
            else if (Date.now() > until) resolve('alone');
            else setTimeout(check, 5);
          };
          check();
        });
      }
      case '/hang':
        return new Promise(() => {});
      case '/block':
        fs.writeFileSync(path.join(process.env.MARKER_DIR, 'started'), '');
        return sleep(Number(req.query.ms)).then(() => 'finished');
      case '/emit':
        return event.emitCloudEvent(req.query.type || 'order.created.v1', 'kfn-test', { x: 1 }, { eventtypeversion: 'v1', kfnhops: req.query.kfnhops })
          .then((r) => ({ status: r.status }))
          .catch((err) => {
            event.setResponseStatus(502);
            return { error: err.message };
          });
      case '/express':
        res.status(202).set('X-Express', 'yes').json({
          q: req.query.name,
          got: req.get('x-test'),
          params: req.params.path,
          is: req.is('json'),
          hostname: req.hostname,
          body: req.body === undefined ? null : req.body,
        });
        return undefined;
      case '/redirect':
        res.cookie('session', 'abc', { httpOnly: true, maxAge: 60000 });
        res.append('X-Multi', 'one').append('X-Multi', 'two');
        res.vary('Accept').vary('Origin');
        res.redirect(301, '/elsewhere');
        return undefined;
      case '/typed':
        res.type('json');
        return JSON.stringify({ typed: res.get('Content-Type') });
      case '/send':
        return sleep(1).then(() => { res.send('sent'); });
      case '/callback':
        // Kyma's third argument: sendResponse(body, status, headers).
        return arguments[2]('via callback', 203, { 'X-Callback': 'yes' });
      case '/callback-status':
        return arguments[2](undefined, 404);
      case '/tracer': {
        const span = event.tracer.startSpan('work');
        span.setAttribute('k', 'v');
        span.end();
        return 'traced';
      }
      default:
        return 'no route ' + req.path;
    }
  },
};

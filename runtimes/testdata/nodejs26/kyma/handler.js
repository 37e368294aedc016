// Handlers as Kyma's nodejs26 documentation and upstream's integration
// tests write them (main(req, res) with Express's request and response, the
// sdk module), one per path.
const { getCloudEvent, emitCloudEvent, getTracer, getFunctionName, getNamespace, getRuntime, getTimeout, getBodySizeLimit } = require('sdk');

// What the upstream CloudEvent test function remembers of the last event.
let lastEvent = {};

function fetchSomething() {
  return new Promise((resolve) => setImmediate(() => resolve({ fetched: true })));
}

const routes = {
  '/hello': (req, res) => {
    res.send('Hello World!');
  },
  // The custom status example of the function specification.
  '/id': (req, res) => {
    if (!req.query.id) {
      res.status(400).send('Missing id parameter');
      return;
    }
    res.json({ id: req.query.id });
  },
  '/async': async (req, res) => {
    res.json(await fetchSomething());
  },
  '/body': (req, res) => {
    const b = req.body;
    res.json({
      kind: b === undefined ? 'undefined' : Buffer.isBuffer(b) ? 'buffer' : Array.isArray(b) ? 'array' : typeof b,
      body: Buffer.isBuffer(b) ? b.toString('base64') : b,
    });
  },
  // Upstream's NodeJSFunctionWithCloudEvent: a POST with a CloudEvent is
  // remembered, a POST without one is emitted as "send-check", GET tells.
  '/ce': (req, res) => {
    if (req.method === 'POST') {
      const ce = getCloudEvent(req);
      if (ce) {
        lastEvent = {
          type: ce.type, source: ce.source, specversion: ce.specversion, id: ce.id,
          time: ce.time, datacontenttype: ce.datacontenttype, data: ce.data, custom: ce.customext,
        };
      } else {
        emitCloudEvent('send-check', process.env.CE_SOURCE, req.body);
      }
      res.send('');
      return;
    }
    res.send(lastEvent);
  },
  '/not-an-event': (req, res) => {
    res.json({ event: getCloudEvent(req) });
  },
  '/emit': async (req, res) => {
    try {
      const answer = await emitCloudEvent(req.query.type || 'order.created.v1', 'kfn-test', { x: 1 }, { eventtypeversion: 'v1' });
      res.json({ status: answer.status });
    } catch (err) {
      res.status(502).json({ error: err.message });
    }
  },
  '/emit-invalid': (req, res) => {
    try {
      emitCloudEvent('', 'kfn-test', {});
      res.send('not thrown');
    } catch (err) {
      res.status(400).send(err.message);
    }
  },
  '/meta': (req, res) => {
    res.json({
      name: getFunctionName(), namespace: getNamespace(), runtime: getRuntime(),
      timeout: getTimeout(), limit: getBodySizeLimit(),
    });
  },
  '/path': (req, res) => {
    res.send(process.env.HANDLER_PATH);
  },
  '/span': (req, res) => {
    getTracer().startActiveSpan('work', (span) => {
      span.setAttribute('kfn.test', true);
      span.end();
      res.json({ traced: typeof span.spanContext().traceId });
    });
  },
  '/throw-string': () => {
    throw 'bad thing';
  },
  '/throw': () => {
    throw new Error('secret detail');
  },
  '/reject': async () => {
    throw new Error('rejected');
  },
  '/late-reject': async (req, res) => {
    res.send('answered');
    await fetchSomething();
    throw new Error('failed after answering');
  },
  '/never': () => {},
};

module.exports = {
  main: function (req, res) {
    const route = routes[req.path];
    if (!route) {
      res.status(404).send('no route ' + req.path);
      return;
    }
    return route(req, res);
  },
};

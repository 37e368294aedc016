// Kyma's tracing test function (tests/serverless/internal/resources/runtimes,
// BasicTracingNodeFunction) in kfn's words: the handler makes an HTTP
// request of its own, to TARGET_URL, with Node.js's http module (axios
// uses it too), and answers with the trace id its own OpenTelemetry API
// sees as the active span's.
const http = require('node:http');
const api = require('@opentelemetry/api');

module.exports = {
  main: function () {
    const active = api.trace.getActiveSpan();
    return new Promise((resolve, reject) => {
      http.get(process.env.TARGET_URL, (res) => {
        res.resume();
        res.on('end', () => resolve({ active: active ? active.spanContext().traceId : null }));
      }).on('error', reject);
    });
  },
};

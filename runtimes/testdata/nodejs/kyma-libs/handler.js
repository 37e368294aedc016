// A Kyma handler that uses the libraries Kyma's Node.js image provides,
// without a package.json of its own.
const axios = require('axios');
const { CloudEvent } = require('cloudevents');
const co = require('co');
const express = require('express');
const morgan = require('morgan');
const fs = require('mz/fs');
const { trace } = require('@opentelemetry/api');

module.exports = {
  main: async function (event, context) {
    const ce = new CloudEvent({ type: 'order.created.v1', source: 'shop', data: { id: 1 } });
    const fromCo = await co(function* () { return yield Promise.resolve('co'); });
    return {
      axios: typeof axios.get,
      cloudevents: ce.type,
      co: fromCo,
      express: typeof express.Router,
      morgan: typeof morgan('combined'),
      mz: typeof (await fs.readdir('.')).length,
      otel: typeof trace.getTracer,
      axiosVersion: require('axios/package.json').version,
    };
  },
};

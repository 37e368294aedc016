// A Kyma handler that uses the libraries Kyma's Node.js image provides,
// without a package.json of its own.
const axios = require('axios');
const { CloudEvent } = require('cloudevents');
const express = require('express');
const { trace } = require('@opentelemetry/api');

module.exports = {
  main: async function (event, context) {
    const ce = new CloudEvent({ type: 'order.created.v1', source: 'shop', data: { id: 1 } });
    return {
      axios: typeof axios.get,
      cloudevents: ce.type,
      express: typeof express.Router,
      otel: typeof trace.getTracer,
      axiosVersion: require('axios/package.json').version,
    };
  },
};

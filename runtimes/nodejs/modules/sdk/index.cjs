'use strict';
// `require('sdk')` and `import { ... } from 'sdk'` of a nodejs26 handler
// resolve here (NODE_PATH, and the host's resolve hook for ES modules): the
// host's own sdk module, the one instance the host configures. Named
// exports listed one by one, so that ES modules see them.
const {
  getCloudEvent,
  emitCloudEvent,
  getTracer,
  getFunctionName,
  getNamespace,
  getRuntime,
  getTimeout,
  getBodySizeLimit,
} = require('../../sdk.cjs');

module.exports = {
  getCloudEvent,
  emitCloudEvent,
  getTracer,
  getFunctionName,
  getNamespace,
  getRuntime,
  getTimeout,
  getBodySizeLimit,
};

'use strict';
// Reads the host's configuration from the environment (the contract is in
// runtimes/README.md) and fails early with a clear message on bad values.

const path = require('node:path');

function number(env, name, fallback, { min = 0, integer = false } = {}) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || (integer && !Number.isInteger(value))) {
    throw new Error(`invalid ${name}=${JSON.stringify(raw)}: want ${integer ? 'an integer' : 'a number'} >= ${min}`);
  }
  return value;
}

// The handler contracts (KFN_HANDLER_API): main(event, context), or
// nodejs26's main(req, res) with the sdk module.
const APIS = ['event', 'request'];

function load(env = process.env) {
  const api = env.KFN_HANDLER_API || 'event';
  if (!APIS.includes(api)) throw new Error(`invalid KFN_HANDLER_API=${JSON.stringify(api)}: want one of ${APIS.join(', ')}`);
  const timeoutSeconds = number(env, 'FUNC_TIMEOUT', 180, { min: 0.001 });
  // Kyma's variable of each contract, both in MB (MiB, as body-parser counts).
  const bodyLimitMB = number(env, api === 'request' ? 'FUNC_BODY_MB_LIMIT' : 'REQ_MB_LIMIT', 1, { min: 0.000001 });
  const listenFd = env.KFN_LISTEN_FD ? number(env, 'KFN_LISTEN_FD', 0, { min: 3, integer: true }) : undefined;
  const functionDir = path.resolve(env.KFN_FUNCTION_DIR || '/usr/src/app/function');
  // A standby host (standby.cjs) waits for a Function, loaded by a caller
  // holding the token whose SHA-256 this is.
  const standbyTokenHash = env.KFN_STANDBY_TOKEN_SHA256 || '';
  if (standbyTokenHash !== '' && !/^[0-9a-f]{64}$/.test(standbyTokenHash)) {
    throw new Error('invalid KFN_STANDBY_TOKEN_SHA256: want the hex SHA-256 of the token (64 lower-case hex digits)');
  }
  // A host that fetches its dependency set from the cache when it starts
  // (the pod has no install container): its hash, the cache and the
  // directory to unpack into.
  const dependencyHash = env.KFN_DEPENDENCY_HASH || '';
  if (dependencyHash !== '') {
    if (!/^[0-9a-f]{64}$/.test(dependencyHash)) throw new Error('invalid KFN_DEPENDENCY_HASH: want 64 lower-case hex digits');
    if (!env.KFN_DEPENDENCY_CACHE || !env.KFN_DEPS_DIR || !env.FUNC_RUNTIME) {
      throw new Error('KFN_DEPENDENCY_HASH needs KFN_DEPENDENCY_CACHE, KFN_DEPS_DIR and FUNC_RUNTIME');
    }
  }
  return {
    api,
    functionName: env.FUNC_NAME || '',
    namespace: env.SERVICE_NAMESPACE || '',
    runtime: env.FUNC_RUNTIME || '',
    port: number(env, 'FUNC_PORT', 8080, { min: 0, integer: true }),
    listenFd,
    functionDir,
    sourceDir: env.KFN_SOURCE_DIR ? path.resolve(env.KFN_SOURCE_DIR) : '',
    depsDir: env.KFN_DEPS_DIR ? path.resolve(env.KFN_DEPS_DIR) : '',
    libsDir: env.KFN_LIBS_DIR ? path.resolve(env.KFN_LIBS_DIR) : '',
    // Kyma's names of each contract: its newer runtimes renamed them.
    moduleName: (api === 'request' ? env.HANDLER_MOD_NAME : env.MOD_NAME) || 'handler',
    handlerName: (api === 'request' ? env.HANDLER_FUNC_NAME : env.FUNC_HANDLER) || 'main',
    // A log line per request (Apache's combined format) when set to
    // anything, as Kyma's runtimes read it: SERVER_INTERNAL_LOGGER for the
    // newer ones, KYMA_INTERNAL_LOGGER_ENABLED for the older ones.
    requestLog: Boolean(api === 'request' ? env.SERVER_INTERNAL_LOGGER : env.KYMA_INTERNAL_LOGGER_ENABLED),
    timeoutSeconds,
    timeoutMs: Math.max(1, Math.round(timeoutSeconds * 1000)),
    bodyLimitMB,
    bodyLimitBytes: Math.max(1, Math.floor(bodyLimitMB * 1024 * 1024)),
    publisherAddress: env.PUBLISHER_PROXY_ADDRESS || '',
    publisherToken: env.PUBLISHER_TOKEN || '',
    identityTokenFile: env.KFN_IDENTITY_TOKEN_FILE || '',
    dependencyCache: env.KFN_DEPENDENCY_CACHE || '',
    dependencyHash,
    traceCollectorEndpoint: env.TRACE_COLLECTOR_ENDPOINT || '',
    standbyTokenHash,
  };
}

module.exports = { load };

'use strict';
// Standby: a host started without a Function (KFN_STANDBY_TOKEN_SHA256
// set) waits, listening, until one caller holding the token loads a
// Function into it with POST /_kfn/specialize; from then on it is that
// Function's host, for good. See runtimes/README.md ("Standby hosts").

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const SPECIALIZE_PATH = '/_kfn/specialize';
// POST /_kfn/prepare fetches a Function's dependencies into the host's
// dependency directory before any Function is given to it, so that a
// specialize request with the same dependencies unpacks nothing.
const PREPARE_PATH = '/_kfn/prepare';
// Largest prepare request body: an environment and a dependency set's name.
const PREPARE_MAX_BYTES = 64 * 1024;
// Largest specialize request body: a Function's source and dependency
// file, with room to spare (Kyma's inline source is far smaller).
const MAX_BYTES = 4 * 1024 * 1024;
const MAX_FILES = 64;
const MAX_ENV = 512;
const FILE_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,254}$/;
const DEPS_HASH = /^[0-9a-f]{64}$/;
// Variables read once at start (the port is already open, the contract and
// directories are the image's), which a specialize request may not set.
const FIXED = new Set(['FUNC_PORT', 'KFN_HANDLER_API', 'KFN_LISTEN_FD', 'KFN_STANDBY_TOKEN_SHA256', 'KFN_FUNCTION_DIR', 'KFN_SOURCE_DIR', 'NODE_OPTIONS']);

function badRequest(message) {
  const err = new Error(message);
  err.status = 400;
  return err;
}

// authorized reports whether an Authorization header carries the bearer
// token whose SHA-256 (hex) is tokenHash, compared in constant time.
function authorized(header, tokenHash) {
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false;
  const got = crypto.createHash('sha256').update(header.slice(7)).digest();
  const want = Buffer.from(tokenHash, 'hex');
  return want.length === got.length && crypto.timingSafeEqual(got, want);
}

// object decodes a request body that must be a JSON object of the given
// fields, and reads its env; it throws an error with status 400 otherwise.
function object(buf, fields) {
  let body;
  try {
    body = JSON.parse(buf.toString('utf8'));
  } catch (err) {
    throw badRequest(`specialize: body is not JSON: ${err.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('specialize: body must be a JSON object');
  for (const k of Object.keys(body)) {
    if (!fields.includes(k)) throw badRequest(`specialize: unknown field ${JSON.stringify(k)} (want ${fields.join(', ')})`);
  }
  const env = strings(body.env || {}, 'env', MAX_ENV, (name) => {
    if (!ENV_NAME.test(name)) return 'is not a variable name';
    if (FIXED.has(name)) return 'is fixed when the host starts';
    return '';
  });
  return { body, env };
}

// parse reads a specialize request body: {"env": {NAME: value}, "files":
// {name: content}, "dependencies": {"runtime": name, "hash": hex}}, all
// strings, dependencies optional; it throws an error with status 400 that
// says what is wrong.
function parse(buf) {
  const { body, env } = object(buf, ['env', 'files', 'dependencies']);
  const files = strings(body.files, 'files', MAX_FILES, (name) => (FILE_NAME.test(name) ? '' : 'is not a plain file name'));
  if (Object.keys(files).length === 0) throw badRequest('specialize: files is empty: a Function needs its source');
  return { env, files, dependencies: dependencies(body.dependencies) };
}

// parsePreparation reads a prepare request body: {"env": {NAME: value},
// "dependencies": {"runtime": name, "hash": hex}}, dependencies required,
// no files; it throws an error with status 400 that says what is wrong.
function parsePreparation(buf) {
  try {
    const { body, env } = object(buf, ['env', 'dependencies']);
    const deps = dependencies(body.dependencies);
    if (deps === null) throw badRequest('specialize: dependencies are required');
    return { env, dependencies: deps };
  } catch (err) {
    err.message = err.message.replace(/^specialize:/, 'prepare:');
    throw err;
  }
}

// dependencies reads the optional dependencies field: the runtime name and
// dependency hash the dependency cache keeps the Function's installed
// dependencies under.
function dependencies(d) {
  if (d === undefined || d === null) return null;
  if (typeof d !== 'object' || Array.isArray(d)) throw badRequest('specialize: dependencies must be an object {runtime, hash}');
  for (const k of Object.keys(d)) {
    if (k !== 'runtime' && k !== 'hash') throw badRequest(`specialize: dependencies: unknown field ${JSON.stringify(k)} (want runtime, hash)`);
  }
  if (typeof d.runtime !== 'string' || d.runtime === '') throw badRequest('specialize: dependencies.runtime must be a runtime name');
  if (typeof d.hash !== 'string' || !DEPS_HASH.test(d.hash)) throw badRequest('specialize: dependencies.hash must be 64 lower-case hex digits');
  return { runtime: d.runtime, hash: d.hash };
}

function strings(obj, field, max, check) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw badRequest(`specialize: ${field} must be an object of strings`);
  const keys = Object.keys(obj);
  if (keys.length > max) throw badRequest(`specialize: ${field} has ${keys.length} entries, at most ${max}`);
  const out = Object.create(null);
  for (const k of keys) {
    const problem = check(k);
    if (problem) throw badRequest(`specialize: ${field} ${JSON.stringify(k.slice(0, 64))} ${problem}`);
    if (typeof obj[k] !== 'string') throw badRequest(`specialize: ${field} ${JSON.stringify(k)} must be a string`);
    if (field === 'env' && obj[k].includes('\0')) throw badRequest(`specialize: env ${JSON.stringify(k)} holds a NUL character`);
    out[k] = obj[k];
  }
  return out;
}

// writeFiles writes the Function's files into dir (the function's writable
// directory), each owner-writable.
function writeFiles(dir, files) {
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(dir, name);
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, content, { mode: 0o644, flag: 'wx' });
  }
}

module.exports = { SPECIALIZE_PATH, PREPARE_PATH, MAX_BYTES, PREPARE_MAX_BYTES, authorized, parse, parsePreparation, writeFiles };

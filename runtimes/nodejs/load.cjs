'use strict';
// Finding and importing the user's handler module (CommonJS or ES module),
// and making the function's installed dependencies resolvable from both.

const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { pathToFileURL } = require('node:url');

const EXTENSIONS = ['.js', '.mjs', '.cjs'];

function isBare(specifier) {
  return !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
}

function notFound(err) {
  return err && (err.code === 'ERR_MODULE_NOT_FOUND' || err.code === 'MODULE_NOT_FOUND');
}

// The modules the host provides to request-API (nodejs26) handlers as
// packages, by name: resolved last, so a function's own dependency of the
// same name wins, as in Kyma's image.
const HOST_MODULES = { sdk: path.join(__dirname, 'modules', 'sdk', 'index.cjs') };

// registerDepsHooks makes bare imports that fail to resolve from the
// function directory fall back to <depsDir>/node_modules, then to
// <libsDir>/node_modules (the libraries Kyma's images provide), then, with
// hostModules, to the host's own modules (sdk). ES modules ignore
// NODE_PATH, and the function directory may be read-only, so a resolve hook
// is the only way to reach dependencies installed elsewhere. CommonJS
// require() finds them through NODE_PATH, which the platform sets in the
// same order.
function registerDepsHooks(depsDir, libsDir, hostModules) {
  const parents = [depsDir, libsDir].filter(Boolean).map((d) => pathToFileURL(path.join(d, 'package.json')).href);
  const modules = {};
  if (hostModules) for (const [name, file] of Object.entries(HOST_MODULES)) modules[name] = pathToFileURL(file).href;
  if (parents.length === 0 && !hostModules) return 'none';
  if (typeof Module.registerHooks === 'function') {
    Module.registerHooks({
      resolve(specifier, context, nextResolve) {
        try {
          return nextResolve(specifier, context);
        } catch (err) {
          if (!notFound(err) || !isBare(specifier)) throw err;
          let last = err;
          for (const parentURL of parents) {
            try {
              return nextResolve(specifier, { ...context, parentURL });
            } catch (again) {
              if (!notFound(again)) throw again;
              last = again;
            }
          }
          if (Object.hasOwn(modules, specifier)) return { url: modules[specifier], format: 'commonjs', shortCircuit: true };
          throw last;
        }
      },
    });
    return 'registerHooks';
  }
  if (typeof Module.register === 'function') {
    Module.register(pathToFileURL(path.join(__dirname, 'deps-hooks.mjs')).href, { data: { parents, modules } });
    return 'register';
  }
  return 'none';
}

function moduleFile(dir, name) {
  const candidates = EXTENSIONS.includes(path.extname(name)) ? [name] : EXTENSIONS.map((ext) => name + ext);
  for (const c of candidates) {
    const file = path.join(dir, c);
    if (fs.existsSync(file)) return file;
  }
  throw new Error(`no handler module in ${dir}: looked for ${candidates.join(', ')}`);
}

function pick(ns, name, file) {
  const def = ns.default;
  const hasDefault = def !== null && (typeof def === 'object' || typeof def === 'function');
  if (typeof ns[name] === 'function') {
    return hasDefault && def[name] === ns[name] ? ns[name].bind(def) : ns[name];
  }
  if (hasDefault && typeof def[name] === 'function') return def[name].bind(def);
  if (typeof def === 'function' && name === 'main') return def;
  throw new Error(`${file} exports no function "${name}": use module.exports = { ${name} }, export function ${name} or export default { ${name} }`);
}

// importModule loads a handler module and returns a namespace-like object.
// CommonJS files are loaded with require(), which skips initialising the
// ES module loader (several milliseconds of every cold start); anything that
// turns out to be an ES module is loaded with import(). The fallback only
// follows errors raised before any code of the module ran (syntax, ESM-only,
// ESM resolution), so no handler code runs twice.
async function importModule(file) {
  if (path.extname(file) !== '.mjs') {
    try {
      const exp = require(file);
      if (exp !== null && typeof exp === 'object' && exp[Symbol.toStringTag] === 'Module') return exp;
      return { default: exp };
    } catch (err) {
      const esm = err instanceof SyntaxError || (err && (err.code === 'ERR_REQUIRE_ESM' ||
        err.code === 'ERR_REQUIRE_ASYNC_MODULE' || err.code === 'ERR_MODULE_NOT_FOUND'));
      if (!esm) throw err;
    }
  }
  return import(pathToFileURL(file).href);
}

// copySources copies the regular files of dir from into dir to (the
// function's writable directory), replacing what is there. Names starting
// with ".." are a ConfigMap volume's own bookkeeping (..data and its
// timestamped directory) and are skipped; its files are symbolic links
// into them, which are followed. Copies are owner-writable whatever the
// source's mode (a ConfigMap's files are read-only).
function copySources(from, to) {
  if (!from || from === to) return;
  for (const name of fs.readdirSync(from)) {
    if (name.startsWith('..')) continue;
    const src = path.join(from, name);
    let st;
    try {
      st = fs.statSync(src);
    } catch {
      continue; // a dangling link
    }
    if (!st.isFile()) continue;
    const dst = path.join(to, name);
    fs.rmSync(dst, { force: true });
    fs.writeFileSync(dst, fs.readFileSync(src), { mode: 0o644 });
  }
}

// loadHandler copies the source into the function's directory (when
// KFN_SOURCE_DIR is set), makes that the working directory, sets
// HANDLER_PATH as Kyma does (the handler module; for nodejs26 the
// function's directory), imports the module and returns its handler
// function.
async function loadHandler(cfg) {
  registerDepsHooks(cfg.depsDir, cfg.libsDir, cfg.api === 'request');
  try {
    copySources(cfg.sourceDir, cfg.functionDir);
  } catch (err) {
    err.message = `copy the source from ${cfg.sourceDir} into ${cfg.functionDir}: ${err.message}`;
    throw err;
  }
  process.chdir(cfg.functionDir);
  const file = moduleFile(cfg.functionDir, cfg.moduleName);
  process.env.HANDLER_PATH = cfg.api === 'request' ? cfg.functionDir : file;
  let ns;
  try {
    ns = await importModule(file);
  } catch (err) {
    if (err instanceof Error) err.message = `${locate(err, file)}: ${err.message}`;
    throw err;
  }
  return pick(ns, cfg.handlerName, file);
}

// locate names where a load error happened in the handler's own code:
// file:line of a syntax error (the first line of V8's stack), else the
// first stack frame in file (an error thrown while the module ran), else
// the file.
function locate(err, file) {
  const stack = String(err.stack || '');
  const first = stack.slice(0, stack.indexOf('\n') === -1 ? stack.length : stack.indexOf('\n'));
  if (first.startsWith(file + ':') && /^\d+$/.test(first.slice(file.length + 1))) return first;
  const at = stack.indexOf(file + ':');
  if (at !== -1) {
    const m = /^:(\d+)(?::(\d+))?/.exec(stack.slice(at + file.length));
    if (m) return `${file}:${m[1]}`;
  }
  return file;
}

module.exports = { loadHandler, isBare, notFound };

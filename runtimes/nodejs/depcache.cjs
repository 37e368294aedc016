'use strict';
// The dependency cache client (runtimes/README.md, "Dependency cache"): a
// Function's installed dependency directory travels as a gzip-compressed
// tar to and from <KFN_DEPENDENCY_CACHE>/<runtime>/<hash>, with the pod's
// identity token as the bearer token, and, to store, the install step's
// writer token (KFN_DEPENDENCY_WRITER_TOKEN_FILE) in Kfn-Dependency-Writer.
// The install init container runs it as a program:
//
//   node depcache.cjs fetch --runtime=nodejs22 --hash=<hex> --dir=/usr/src/app/deps
//     exit 0: the dependencies came from the cache and are in --dir;
//     exit 1: they did not (not there, no cache, an error), --dir is empty
//     (it is emptied first).
//   node depcache.cjs store --runtime=nodejs22 --hash=<hex> --dir=/usr/src/app/deps
//     uploads --dir; exit 0: the cache holds the set (stored, or there
//     already); exit 1: it does not (the failed upload is logged). The
//     install script never fails the pod for it.
//
// As a program, each asks again after an answer that may pass (429, 502,
// 503, 504, or no connection: the event bridge restarting, its bucket not
// made yet): fetch up to FETCH_ATTEMPTS times, store up to STORE_ATTEMPTS,
// waiting KFN_DEPENDENCY_CACHE_RETRY_MS (default 1000), then twice as long
// each time, or the cache's Retry-After, at most MAX_RETRY_WAIT_MS.
//
// A standby host given a Function with dependencies calls fetch() itself.
// Unpacking refuses what would reach outside the directory: absolute
// names, "..", entries below a symbolic link, links whose target is
// absolute or leads out of the directory (followed through the others,
// dangling or not), and anything but regular files, directories and
// symbolic links; and what passes its bounds (unpacked bytes, entries,
// extended header size, name length: MAX_* below).

const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const zlib = require('node:zlib');
const { Readable } = require('node:stream');
const { pipeline } = require('node:stream/promises');

const BLOCK = 512;
// Bounds of one exchange with the cache: the install container falls back
// to installing, a standby host fails its specialize request.
const FETCH_TIMEOUT_MS = 60 * 1000;
const STORE_TIMEOUT_MS = 120 * 1000;
// How many times the program asks the cache when its answer may pass: a
// fetch that gives up installs (npm), a store that gives up leaves the
// next pod to install again.
const FETCH_ATTEMPTS = 3;
const STORE_ATTEMPTS = 5;
const MAX_RETRY_WAIT_MS = 10 * 1000;
const TRANSIENT_STATUSES = new Set([429, 502, 503, 504]);
// Bounds of what a fetch unpacks (what the cache serves is as untrusted as
// what a tenant stored): the bytes the gzip stream expands to (the install
// container's KFN_DEPENDENCY_MAX_BYTES, the dependencies volume's size; a
// gzip bomb expands a thousand times), entries, one extended header (pax,
// GNU long name; names and link targets are at most MAX_PATH_BYTES), such
// headers in a row, a name's and a name part's length (Linux's PATH_MAX and
// NAME_MAX), and links followed in a row (Linux's).
const MAX_UNPACKED_BYTES = 1 << 30;
const MAX_ENTRIES = 200000;
const MAX_META = 16 << 10;
const MAX_CHAINED_HEADERS = 8;
const MAX_PATH_BYTES = 4096;
const MAX_NAME_BYTES = 255;
const MAX_LINK_HOPS = 40;
// The header of the install step's writer token (KFN_DEPENDENCY_WRITER_TOKEN_FILE),
// which a store sends beside the identity token: the cache stores nothing
// without it.
const WRITER_HEADER = 'Kfn-Dependency-Writer';
const HASH = /^[0-9a-f]{64}$/;
const RUNTIME = /^[a-z][a-z0-9]{0,31}$/;

class UnsafeEntry extends Error {}

// objectURL is the address of a dependency set in the cache.
function objectURL(base, runtime, hash) {
  if (!RUNTIME.test(runtime)) throw new Error(`invalid runtime name ${JSON.stringify(runtime)}`);
  if (!HASH.test(hash)) throw new Error(`invalid dependency hash ${JSON.stringify(hash)}: want 64 lower-case hex digits`);
  return `${base.replace(/\/+$/, '')}/${runtime}/${hash}`;
}

// bearer reads the identity token file (re-read every time: the kubelet
// renews it); '' when there is none.
function bearer(tokenFile) {
  if (!tokenFile) return '';
  try {
    return fs.readFileSync(tokenFile, 'utf8').trim();
  } catch {
    return '';
  }
}

// cacheError is an error of an exchange with the cache; transient when
// asking again may succeed, retryAfterMs the cache's Retry-After (0: none).
function cacheError(message, transient, retryAfterMs = 0) {
  return Object.assign(new Error(message), { transient, retryAfterMs });
}

// answerError is the error for a cache's answer other than those expected.
async function answerError(method, url, res) {
  const retryAfter = Number(res.headers['retry-after']) * 1000 || 0;
  return cacheError(`${method} ${url}: ${res.statusCode} ${await text(res)}`, TRANSIENT_STATUSES.has(res.statusCode), retryAfter);
}

// send makes one request; it rejects with a transient error when no
// connection was made or it broke (not when the request outlasted
// timeoutMs).
function send(method, url, token, timeoutMs, body, writer) {
  const u = new URL(url);
  const client = u.protocol === 'https:' ? https : http;
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (writer) headers[WRITER_HEADER] = writer;
  if (body) headers['Content-Type'] = 'application/gzip';
  return new Promise((resolve, reject) => {
    const fail = (err) => reject(cacheError(`${method} ${url}: ${err.message}`, err.name !== 'TimeoutError' && err.name !== 'AbortError'));
    const req = client.request(u, { method, headers, signal: AbortSignal.timeout(timeoutMs) }, resolve);
    req.on('error', fail);
    if (body) pipeline(body, req).catch(fail);
    else req.end();
  });
}

async function text(res) {
  let out = '';
  for await (const chunk of res) if (out.length < 512) out += chunk.toString('utf8');
  return out.trim().slice(0, 512);
}

// emptyDir removes everything inside dir (a volume's root stays).
function emptyDir(dir) {
  for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
}

// fetch GETs the dependency set and unpacks it into dir, which must be
// empty. It resolves to true when the dependencies are in dir, false when
// the cache has none (404); it rejects on any other answer or error, and
// then leaves dir empty.
async function fetch({ base, runtime, hash, dir, tokenFile, timeoutMs = FETCH_TIMEOUT_MS }) {
  const url = objectURL(base, runtime, hash);
  const res = await send('GET', url, bearer(tokenFile), timeoutMs);
  if (res.statusCode === 404) {
    res.resume();
    return false;
  }
  if (res.statusCode !== 200) throw await answerError('GET', url, res);
  try {
    await unpack(res, dir);
  } catch (err) {
    emptyDir(dir);
    throw new Error(`GET ${url}: unpack into ${dir}: ${err.message}`);
  }
  return true;
}

// store packs dir and PUTs it; it resolves to the cache's answer status
// (201 stored, 200 already there) and rejects on any other answer.
async function store({ base, runtime, hash, dir, tokenFile, writerTokenFile, timeoutMs = STORE_TIMEOUT_MS }) {
  const url = objectURL(base, runtime, hash);
  const body = zlib.createGzip();
  // A file that cannot be read fails the upload (the request is aborted).
  pipeline(Readable.from(entries(dir)), body).catch((err) => body.destroy(err));
  const res = await send('PUT', url, bearer(tokenFile), timeoutMs, body, bearer(writerTokenFile));
  if (res.statusCode !== 200 && res.statusCode !== 201) throw await answerError('PUT', url, res);
  res.resume();
  return res.statusCode;
}

// ---- tar

function octal(buf, off, len) {
  const s = buf.toString('latin1', off, off + len).replace(/\0.*$/s, '').trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new UnsafeEntry(`bad number field ${JSON.stringify(s)}`);
  return parseInt(s, 8);
}

function cstring(buf, off, len) {
  const end = buf.indexOf(0, off);
  return buf.toString('utf8', off, end === -1 || end > off + len ? off + len : end);
}

function checksumOK(h) {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  return sum === octal(h, 148, 8);
}

// paxRecords parses "<len> key=value\n" records.
function paxRecords(buf) {
  const out = {};
  let off = 0;
  while (off < buf.length) {
    const sp = buf.indexOf(0x20, off);
    if (sp === -1) break;
    const len = parseInt(buf.toString('latin1', off, sp), 10);
    if (!(len > 0) || off + len > buf.length) throw new UnsafeEntry('bad pax header');
    const rec = buf.toString('utf8', sp + 1, off + len - 1);
    const eq = rec.indexOf('=');
    if (eq !== -1) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    off += len;
  }
  return out;
}

// safeName returns the relative path of an entry name, or '' for the
// directory itself; it throws for a name that leaves the directory.
function safeName(name) {
  if (name.includes('\0')) throw new UnsafeEntry(`entry ${JSON.stringify(name)}: NUL in its name`);
  if (name.startsWith('/')) throw new UnsafeEntry(`entry ${JSON.stringify(name)}: an absolute name`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new UnsafeEntry(`entry ${JSON.stringify(name)}: ".." in its name`);
  return parts.join('/');
}

// checkLength refuses a name or link target longer than the file system
// takes, with a clear error.
function checkLength(what, rel, name) {
  if (Buffer.byteLength(name) > MAX_PATH_BYTES) throw new UnsafeEntry(`${what} ${rel.slice(0, 64)}...: longer than ${MAX_PATH_BYTES} bytes`);
  for (const part of name.split('/')) {
    if (Buffer.byteLength(part) > MAX_NAME_BYTES) throw new UnsafeEntry(`${what} ${rel.slice(0, 64)}...: a name longer than ${MAX_NAME_BYTES} bytes`);
  }
}

// limit reads a positive integer bound from the environment.
function limit(name, fallback) {
  const v = Number(process.env[name]);
  return Number.isSafeInteger(v) && v > 0 ? v : fallback;
}

// Extractor writes a tar stream's entries under root as they arrive.
class Extractor {
  constructor(root) {
    this.root = path.resolve(root);
    this.entries = 0;
    this.chained = 0;
    // Bytes received and not used yet: buf from off.
    this.buf = Buffer.alloc(0);
    this.off = 0;
    this.state = 'header';
    this.entry = null;
    this.pax = {};
    this.links = [];
    this.done = false;
  }

  get have() {
    return this.buf.length - this.off;
  }

  take(n) {
    const out = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return out;
  }

  write(chunk) {
    if (this.done) return;
    this.buf = this.have > 0 ? Buffer.concat([this.buf.subarray(this.off), chunk]) : chunk;
    this.off = 0;
    for (;;) {
      if (this.state === 'header') {
        if (this.have < BLOCK) return;
        const h = this.take(BLOCK);
        if (h.every((b) => b === 0)) {
          this.done = true;
          return;
        }
        this.header(h);
      } else if (this.state === 'data') {
        const e = this.entry;
        if (e.left > 0) {
          if (this.have === 0) return;
          const n = Math.min(e.left, this.have);
          const part = this.take(n);
          if (e.fd !== undefined) fs.writeSync(e.fd, part);
          else if (e.meta) e.meta.push(Buffer.from(part));
          // else the data of a directory or link: nothing to keep
          e.left -= n;
          continue;
        }
        if (this.have < e.pad) return;
        this.take(e.pad);
        this.finish(e);
        this.state = 'header';
      }
    }
  }

  end() {
    if (this.state !== 'header') throw new UnsafeEntry('the archive ends inside an entry');
    for (const rel of this.links) {
      if (this.leadsOut(rel)) throw new UnsafeEntry(`symbolic link ${rel}: leads out of the directory`);
    }
  }

  header(h) {
    if (!checksumOK(h)) throw new UnsafeEntry('bad tar header checksum');
    const type = String.fromCharCode(h[156] || 0x30);
    const size = octal(h, 124, 12);
    const magic = h.toString('latin1', 257, 262);
    let name = cstring(h, 0, 100);
    if (magic === 'ustar') {
      const prefix = cstring(h, 345, 155);
      if (prefix) name = `${prefix}/${name}`;
    }
    let linkname = cstring(h, 157, 100);
    const e = { type, size, left: size, pad: (BLOCK - (size % BLOCK)) % BLOCK, mode: octal(h, 100, 8) };
    if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
      if (size > MAX_META) throw new UnsafeEntry(`an extended header of ${size} bytes (at most ${MAX_META})`);
      if (++this.chained > MAX_CHAINED_HEADERS) throw new UnsafeEntry(`more than ${MAX_CHAINED_HEADERS} extended headers in a row`);
      e.meta = [];
      this.entry = e;
      this.state = 'data';
      return;
    }
    if (this.pax.path !== undefined) name = this.pax.path;
    if (this.pax.linkpath !== undefined) linkname = this.pax.linkpath;
    this.pax = {};
    this.chained = 0;
    if (++this.entries > MAX_ENTRIES) throw new UnsafeEntry(`the archive has more than ${MAX_ENTRIES} entries`);
    checkLength('entry', name, name);
    e.rel = safeName(name);
    e.full = e.rel === '' ? this.root : path.join(this.root, e.rel);
    switch (type) {
      case '0':
      case '7':
        if (e.rel === '') throw new UnsafeEntry('a file entry with no name');
        this.parents(e.rel);
        e.fd = fs.openSync(e.full, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | (fs.constants.O_NOFOLLOW || 0),
          e.mode & 0o111 ? 0o755 : 0o644);
        break;
      case '5':
        if (e.rel !== '') this.dir(e.rel);
        break;
      case '2': {
        if (e.rel === '') throw new UnsafeEntry('a symbolic link with no name');
        checkLength('symbolic link', e.rel, linkname);
        if (linkname === '' || linkname.startsWith('/')) throw new UnsafeEntry(`symbolic link ${e.rel} -> ${linkname}: an absolute target`);
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(e.rel), linkname));
        if (target === '..' || target.startsWith('../')) throw new UnsafeEntry(`symbolic link ${e.rel} -> ${linkname}: leaves the directory`);
        this.parents(e.rel);
        fs.symlinkSync(linkname, e.full);
        this.links.push(e.rel);
        break;
      }
      default:
        throw new UnsafeEntry(`entry ${JSON.stringify(e.rel)} of type ${JSON.stringify(type)}: only files, directories and symbolic links`);
    }
    this.entry = e;
    this.state = 'data';
  }

  finish(e) {
    if (e.fd !== undefined) {
      fs.closeSync(e.fd);
      return;
    }
    if (!e.meta) return;
    const buf = Buffer.concat(e.meta);
    if (e.type === 'x') this.pax = paxRecords(buf);
    else if (e.type === 'L') this.pax.path = cstring(buf, 0, buf.length);
    else if (e.type === 'K') this.pax.linkpath = cstring(buf, 0, buf.length);
  }

  // parents makes the directories above rel, each a real directory (never
  // a symbolic link: nothing is written through one).
  parents(rel) {
    const parts = rel.split('/');
    parts.pop();
    let dir = this.root;
    for (const p of parts) {
      dir = path.join(dir, p);
      this.mkdir(dir, rel);
    }
  }

  dir(rel) {
    this.parents(rel);
    this.mkdir(path.join(this.root, rel), rel);
  }

  mkdir(dir, rel) {
    let st;
    try {
      st = fs.lstatSync(dir);
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
      fs.mkdirSync(dir, { mode: 0o755 });
      return;
    }
    if (!st.isDirectory()) throw new UnsafeEntry(`entry ${rel}: below ${path.relative(this.root, dir)}, which is not a directory`);
  }

  // leadsOut tells whether the symbolic link rel, followed as the kernel
  // would through the links under the root, leads out of it. A name that
  // does not exist is taken as it is written (a dangling link leads where
  // its target would be made); at most MAX_LINK_HOPS links are followed.
  leadsOut(rel) {
    const parts = rel.split('/');
    const done = parts.slice(0, -1); // real directories: the link's parents were made so
    let todo = [parts[parts.length - 1]];
    let hops = 0;
    while (todo.length > 0) {
      const part = todo.shift();
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (done.length === 0) return true;
        done.pop();
        continue;
      }
      let st;
      try {
        st = fs.lstatSync(path.join(this.root, ...done, part));
      } catch (err) {
        if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw err;
        done.push(part);
        continue;
      }
      if (st.isSymbolicLink()) {
        if (++hops > MAX_LINK_HOPS) throw new UnsafeEntry(`symbolic link ${rel}: more than ${MAX_LINK_HOPS} links in a row`);
        const target = fs.readlinkSync(path.join(this.root, ...done, part));
        if (target.startsWith('/')) return true;
        todo = target.split('/').concat(todo);
        continue;
      }
      done.push(part);
    }
    return false;
  }
}

// unpack writes a gzip-compressed tar stream into dir.
async function unpack(stream, dir) {
  const x = new Extractor(dir);
  const max = limit('KFN_DEPENDENCY_MAX_BYTES', MAX_UNPACKED_BYTES);
  let total = 0;
  // Why the unpacking stopped: pipeline rejects with an AbortError instead
  // when its last step throws (Node.js 20).
  let refused;
  try {
    await pipeline(stream, zlib.createGunzip(), async (source) => {
      try {
        for await (const chunk of source) {
          total += chunk.length;
          if (total > max) throw new UnsafeEntry(`the archive unpacks to more than ${max} bytes`);
          x.write(chunk);
        }
      } catch (err) {
        refused = err;
        throw err;
      }
    }).catch((err) => {
      throw refused || err;
    });
    x.end();
  } finally {
    if (x.entry && x.entry.fd !== undefined && x.state === 'data') {
      try {
        fs.closeSync(x.entry.fd);
      } catch {
        // closed already
      }
    }
  }
}

// ---- packing

function header(name, { type, size = 0, mode, linkname = '' }) {
  const blocks = [];
  const long = Buffer.byteLength(name) > 100 || Buffer.byteLength(linkname) > 100;
  if (long) {
    // A pax extended header carries names longer than ustar's fields.
    let records = '';
    for (const [k, v] of [['path', name], ['linkpath', linkname]]) {
      if (!v) continue;
      const body = ` ${k}=${v}\n`;
      let len = Buffer.byteLength(body) + 1;
      while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
      records += `${len}${body}`;
    }
    const data = Buffer.from(records, 'utf8');
    blocks.push(ustar('PaxHeader', { type: 'x', size: data.length, mode: 0o644 }), data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
  }
  blocks.push(ustar(long ? name.slice(0, 99) : name, { type, size, mode, linkname: long ? '' : linkname }));
  return Buffer.concat(blocks);
}

function ustar(name, { type, size, mode, linkname = '' }) {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, 'utf8');
  h.write(`${mode.toString(8).padStart(7, '0')}\0`, 100, 'latin1');
  h.write('0000000\0', 108, 'latin1');
  h.write('0000000\0', 116, 'latin1');
  h.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  h.write('00000000000\0', 136, 'latin1');
  h.write('        ', 148, 'latin1');
  h.write(type, 156, 'latin1');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0' + '00', 257, 'latin1');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += h[i];
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return h;
}

// entries yields dir's tree as tar blocks: directories, regular files and
// symbolic links, names relative, in a fixed order; anything else is left
// out.
async function* entries(dir) {
  const walk = function* (rel) {
    const full = rel ? path.join(dir, rel) : dir;
    for (const name of fs.readdirSync(full).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(path.join(dir, r));
      if (st.isDirectory()) {
        yield header(`${r}/`, { type: '5', mode: 0o755 });
        yield* walk(r);
      } else if (st.isSymbolicLink()) {
        yield header(r, { type: '2', mode: 0o777, linkname: fs.readlinkSync(path.join(dir, r)) });
      } else if (st.isFile()) {
        yield* file(r, st);
      }
    }
  };
  const file = function* (r, st) {
    yield header(r, { type: '0', size: st.size, mode: st.mode & 0o111 ? 0o755 : 0o644 });
    const fd = fs.openSync(path.join(dir, r), 'r');
    try {
      let left = st.size;
      while (left > 0) {
        const buf = Buffer.allocUnsafe(Math.min(left, 1 << 20));
        const n = fs.readSync(fd, buf, 0, buf.length, null);
        if (n === 0) throw new Error(`${r} shrank while it was packed`);
        left -= n;
        yield buf.subarray(0, n);
      }
    } finally {
      fs.closeSync(fd);
    }
    const pad = (BLOCK - (st.size % BLOCK)) % BLOCK;
    if (pad) yield Buffer.alloc(pad);
  };
  yield* walk('');
  yield Buffer.alloc(2 * BLOCK);
}

// warm runs once what a fetch runs (an HTTP request and answer, gunzip,
// the tar reader, the file writes) on a tiny archive, through a server of
// its own on 127.0.0.1, in a temporary directory it then removes, so that
// a standby host's first fetch does not pay their first use: about 10 ms
// of CPU, which under a Function's CPU limit (200m for preset S) was
// enough to be throttled for a period (100 ms) on the wake's path. Best
// effort: it never rejects.
async function warm() {
  let tmp;
  let server;
  try {
    tmp = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'kfn-depcache-warm-'));
    const src = path.join(tmp, 'src');
    fs.mkdirSync(path.join(src, 'node_modules', 'warm'), { recursive: true });
    fs.writeFileSync(path.join(src, 'node_modules', 'warm', 'index.js'), 'module.exports = {};\n');
    server = http.createServer((req, res) => {
      res.setHeader('Content-Type', 'application/gzip');
      pipeline(Readable.from(entries(src)), zlib.createGzip(), res).catch(() => res.destroy());
    });
    await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
    const dst = path.join(tmp, 'dst');
    fs.mkdirSync(dst);
    const base = `http://127.0.0.1:${server.address().port}`;
    await fetch({ base, runtime: 'warm', hash: '0'.repeat(64), dir: dst, timeoutMs: 5000 });
  } catch {
    // Only the first real fetch is slower.
  } finally {
    if (server) server.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// ---- the install container's program

function args(argv) {
  const out = {};
  for (const a of argv) {
    const m = /^--([a-z]+)=(.*)$/.exec(a);
    if (!m) throw new Error(`unknown argument ${JSON.stringify(a)}: want --runtime=, --hash=, --dir=`);
    out[m[1]] = m[2];
  }
  for (const k of ['runtime', 'hash', 'dir']) if (!out[k]) throw new Error(`--${k} is required`);
  return out;
}

// again calls call up to attempts times while it rejects with a transient
// error, logging each wait; it rejects with the last error.
async function again(what, attempts, call, log) {
  const ms = Number(process.env.KFN_DEPENDENCY_CACHE_RETRY_MS ?? 1000);
  const delay = Number.isFinite(ms) && ms >= 0 ? ms : 1000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!err.transient || attempt >= attempts) throw err;
      const wait = Math.min(err.retryAfterMs || delay * 2 ** (attempt - 1), MAX_RETRY_WAIT_MS);
      log(`${what}: ${err.message}; asking the cache again in ${(wait / 1000).toFixed(1)} s (${attempt + 1} of ${attempts})`);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

// fetchAtStart fetches a host's own dependency set into dir before its
// handler loads (KFN_DEPENDENCY_HASH), asking again as the program does
// while the cache's answer may pass. It resolves to true when the set is
// in dir, false when the cache has none (404); it rejects when the cache
// could not be read.
async function fetchAtStart(o, log) {
  emptyDir(o.dir); // what a restarted container's last run left
  return again(`dependencies ${o.runtime}/${o.hash.slice(0, 12)}`, FETCH_ATTEMPTS, () => fetch(o), log);
}

async function main(argv) {
  const [command, ...rest] = argv;
  const log = (msg) => console.log(`kfn: ${msg}`);
  let opts;
  try {
    opts = args(rest);
  } catch (err) {
    console.error(`kfn: depcache: ${err.message}`);
    return 2;
  }
  const base = process.env.KFN_DEPENDENCY_CACHE || '';
  const what = `dependencies ${opts.runtime}/${opts.hash.slice(0, 12)}`;
  const o = {
    base, runtime: opts.runtime, hash: opts.hash, dir: opts.dir, tokenFile: process.env.KFN_IDENTITY_TOKEN_FILE || '',
    writerTokenFile: process.env.KFN_DEPENDENCY_WRITER_TOKEN_FILE || '',
  };
  if (command === 'fetch') {
    if (!base) {
      log(`no dependency cache: installing ${what}`);
      return 1;
    }
    const start = process.hrtime.bigint();
    try {
      // What an earlier run of the container left (it is restarted after
      // a failed install) goes: the cache's tree is unpacked alone.
      emptyDir(opts.dir);
      if (await again(what, FETCH_ATTEMPTS, () => fetch(o), log)) {
        log(`${what} from the cache in ${Number((process.hrtime.bigint() - start) / 1000000n)} ms: nothing to install`);
        return 0;
      }
      log(`${what} not in the cache: installing`);
    } catch (err) {
      log(`${what}: the cache could not be read (${err.message}): installing`);
    }
    return 1;
  }
  if (command === 'store') {
    if (!base) return 1;
    try {
      const status = await again(what, STORE_ATTEMPTS, () => store(o), log);
      log(status === 201 ? `${what} stored in the cache` : `${what} were in the cache already`);
      return 0;
    } catch (err) {
      log(`${what} not stored in the cache (${err.message}); the next pod installs them again`);
      return 1;
    }
  }
  console.error('kfn: depcache: usage: depcache.cjs fetch|store --runtime=<name> --hash=<hex> --dir=<dir>');
  return 2;
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(`kfn: depcache: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  });
}

module.exports = { fetch, fetchAtStart, store, unpack, warm, emptyDir, objectURL, UnsafeEntry };

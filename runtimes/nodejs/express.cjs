'use strict';
// Request and Response: Node's own http classes extended with the Express
// conveniences that Kyma handlers call (req.query, req.get(), res.status(),
// res.json(), res.send(), ...). Methods live on the prototypes and values are
// computed on first use, so a request that does not use them pays nothing.

const http = require('node:http');
// req.query is Express 5's "simple" query parser's, which is Node's own
// querystring.parse: "a[b]=1" is the key "a[b]", a repeated key an array,
// an object without a prototype, at most 1,000 keys.
const querystring = require('node:querystring');

// decodeSegment undoes a path segment's escapes (%XY, UTF-8), as
// path-to-regexp does for Express's params; '+' is itself. A malformed
// escape leaves the segment as it is.
function decodeSegment(s) {
  if (s.indexOf('%') === -1) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

// decode undoes a urlencoded form's escapes: '+' is a space, and %XY the
// bytes of UTF-8 or, with latin1, one ISO-8859-1 character each.
function decode(s, latin1) {
  if (s.indexOf('+') !== -1) s = s.replace(/\+/g, ' ');
  if (s.indexOf('%') === -1) return s;
  if (latin1) return s.replace(/%([0-9a-fA-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

// splitURL returns the path and the query string of a request target,
// which may be in absolute form (http://host/path?query).
function splitURL(url) {
  if (url.charCodeAt(0) !== 47 /* / */) {
    const scheme = url.indexOf('://');
    if (scheme !== -1) {
      const slash = url.indexOf('/', scheme + 3);
      const q0 = url.indexOf('?', scheme + 3);
      url = slash === -1 || (q0 !== -1 && q0 < slash) ? '/' + (q0 === -1 ? '' : url.slice(q0)) : url.slice(slash);
    }
  }
  const q = url.indexOf('?');
  return q === -1 ? [url, ''] : [url.slice(0, q), url.slice(q + 1)];
}

function mediaType(contentType) {
  if (!contentType) return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

// typeMatches reports whether the media type matches one pattern of req.is():
// "json", "text/*", "*/json", "application/json", "+json".
function typeMatches(type, pattern) {
  pattern = pattern.toLowerCase();
  if (pattern.indexOf('/') === -1) {
    if (pattern.startsWith('+')) return type.endsWith(pattern);
    const sub = SHORT_TYPES[pattern] || `application/${pattern}`;
    return type === sub;
  }
  const [pm, ps] = pattern.split('/');
  const [tm, ts] = type.split('/');
  if (pm !== '*' && pm !== tm) return false;
  if (ps === '*') return true;
  if (ps.startsWith('*+')) return ts !== undefined && ts.endsWith(ps.slice(1));
  return ps === ts;
}

const SHORT_TYPES = {
  json: 'application/json',
  html: 'text/html',
  text: 'text/plain',
  txt: 'text/plain',
  xml: 'application/xml',
  js: 'text/javascript',
  css: 'text/css',
  bin: 'application/octet-stream',
  urlencoded: 'application/x-www-form-urlencoded',
  multipart: 'multipart/*',
  form: 'application/x-www-form-urlencoded',
  png: 'image/png',
  csv: 'text/csv',
};

const kQuery = Symbol('query');
const kParams = Symbol('params');

class Request extends http.IncomingMessage {
  get query() {
    if (this[kQuery] === undefined) this[kQuery] = querystring.parse(splitURL(this.url)[1]);
    return this[kQuery];
  }
  set query(v) { this[kQuery] = v; }

  // params mirrors Kyma's catch-all route: Express 5 ("*path") names the
  // path's segments "path", split at every '/' (so the first is '' and a
  // trailing '/' gives a last ''), each decoded as a URI component ('+'
  // stays '+'); Express 4 ("*") exposes the whole path as "0".
  get params() {
    if (this[kParams] === undefined) {
      const p = this.path;
      this[kParams] = { 0: p, path: p.split('/').map(decodeSegment) };
    }
    return this[kParams];
  }
  set params(v) { this[kParams] = v; }

  get path() { return splitURL(this.url)[0]; }
  get originalUrl() { return this.url; }
  get baseUrl() { return ''; }
  // protocol, secure, ip, ips and hostname as Express 5 gives them with
  // its default "trust proxy" (false), as in Kyma's runtimes: from the
  // connection and the Host header, never from X-Forwarded-* headers,
  // which any client can send.
  get protocol() { return this.socket && this.socket.encrypted ? 'https' : 'http'; }
  get secure() { return this.protocol === 'https'; }
  get ip() { return this.socket ? this.socket.remoteAddress : undefined; }
  get ips() { return []; }
  get hostname() {
    const host = this.headers.host || '';
    if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
    const colon = host.indexOf(':');
    return colon === -1 ? host : host.slice(0, colon);
  }
  get host() { return this.headers.host; }
  get xhr() { return (this.headers['x-requested-with'] || '').toLowerCase() === 'xmlhttprequest'; }

  get(name) {
    const lc = String(name).toLowerCase();
    if (lc === 'referer' || lc === 'referrer') return this.headers.referer || this.headers.referrer;
    return this.headers[lc];
  }
  header(name) { return this.get(name); }

  // is returns the first matching type (like Express), false when none
  // matches, and null when the request has no body.
  is(...types) {
    if (types.length === 1 && Array.isArray(types[0])) types = types[0];
    if (this.headers['transfer-encoding'] === undefined &&
        (this.headers['content-length'] === undefined || this.headers['content-length'] === '0')) {
      return null;
    }
    const type = mediaType(this.headers['content-type']);
    if (types.length === 0) return type || false;
    for (const t of types) if (typeMatches(type, t)) return t;
    return false;
  }
}

const COOKIE_OPTS = { maxAge: 'Max-Age', domain: 'Domain', path: 'Path', sameSite: 'SameSite' };

class Response extends http.ServerResponse {
  status(code) {
    this.statusCode = code;
    return this;
  }

  set(field, value) {
    if (typeof field === 'object' && field !== null) {
      for (const k of Object.keys(field)) this.set(k, field[k]);
      return this;
    }
    if (String(field).toLowerCase() === 'content-type' && !Array.isArray(value)) value = contentType(String(value));
    this.setHeader(field, Array.isArray(value) ? value.map(String) : String(value));
    return this;
  }
  header(field, value) { return this.set(field, value); }
  get(field) { return this.getHeader(field); }

  append(field, value) {
    const prev = this.getHeader(field);
    const add = Array.isArray(value) ? value.map(String) : [String(value)];
    if (prev === undefined) this.setHeader(field, add.length === 1 ? add[0] : add);
    else this.setHeader(field, [].concat(prev, add));
    return this;
  }

  type(t) {
    this.setHeader('Content-Type', contentType(String(t)));
    return this;
  }
  contentType(t) { return this.type(t); }

  location(url) {
    this.setHeader('Location', url === 'back' ? (this.req.headers.referer || '/') : String(url));
    return this;
  }

  redirect(a, b) {
    const [code, url] = typeof a === 'number' ? [a, b] : [302, a];
    this.location(url);
    this.statusCode = code;
    this.setHeader('Content-Type', 'text/plain; charset=utf-8');
    this.end(`${http.STATUS_CODES[code] || 'Found'}. Redirecting to ${this.getHeader('Location')}`);
  }

  vary(field) {
    const prev = this.getHeader('Vary');
    if (!prev) this.setHeader('Vary', field);
    else if (!String(prev).split(/\s*,\s*/).includes(field)) this.setHeader('Vary', `${prev}, ${field}`);
    return this;
  }

  cookie(name, value, opts = {}) {
    let s = `${name}=${encodeURIComponent(typeof value === 'object' ? 'j:' + JSON.stringify(value) : String(value))}`;
    if (opts.maxAge !== undefined) {
      s += `; Max-Age=${Math.floor(opts.maxAge / 1000)}`;
      if (!opts.expires) opts = { ...opts, expires: new Date(Date.now() + opts.maxAge) };
    }
    if (opts.path === undefined) s += '; Path=/';
    for (const k of ['domain', 'path', 'sameSite']) {
      if (opts[k] !== undefined && opts[k] !== false) {
        s += `; ${COOKIE_OPTS[k]}=${opts[k] === true ? 'Strict' : opts[k]}`;
      }
    }
    if (opts.expires) s += `; Expires=${new Date(opts.expires).toUTCString()}`;
    if (opts.httpOnly) s += '; HttpOnly';
    if (opts.secure) s += '; Secure';
    return this.append('Set-Cookie', s);
  }

  clearCookie(name, opts = {}) {
    return this.cookie(name, '', { path: '/', ...opts, expires: new Date(1), maxAge: undefined });
  }

  json(obj) {
    const body = JSON.stringify(obj);
    this.setHeader('Content-Type', this.hasHeader('Content-Type') ? withCharset(this.getHeader('Content-Type')) : 'application/json; charset=utf-8');
    this.end(body === undefined ? '' : body);
    return this;
  }

  send(body) {
    if (body === undefined || body === null) {
      this.end();
    } else if (typeof body === 'string') {
      this.setHeader('Content-Type', this.hasHeader('Content-Type') ? withCharset(this.getHeader('Content-Type')) : 'text/html; charset=utf-8');
      this.end(this.req && this.req.method === 'HEAD' ? undefined : body);
    } else if (Buffer.isBuffer(body) || body instanceof Uint8Array) {
      if (!this.hasHeader('Content-Type')) this.setHeader('Content-Type', 'application/octet-stream');
      this.end(this.req && this.req.method === 'HEAD' ? undefined : body);
    } else {
      return this.json(body);
    }
    return this;
  }

  sendStatus(code) {
    this.statusCode = code;
    this.setHeader('Content-Type', 'text/plain; charset=utf-8');
    this.end(http.STATUS_CODES[code] || String(code));
    return this;
  }
}

// contentType is Express's res.set('Content-Type', t) (mime-types'
// contentType): a short name ("json", ".html") is looked up, and a type
// without a charset that has one (text/*, JSON, JavaScript) gets utf-8.
function contentType(t) {
  let full = t.indexOf('/') === -1 ? SHORT_TYPES[t.replace(/^\./, '').toLowerCase()] || 'application/octet-stream' : t;
  const type = full.split(';')[0].trim().toLowerCase();
  if (!/;\s*charset=/i.test(full) && (type.startsWith('text/') || type === 'application/json' || type === 'application/javascript')) {
    full += '; charset=utf-8';
  }
  return full;
}

// withCharset is Express's setCharset(type, 'utf-8'), which res.send of a
// string (and so res.json) applies to the Content-Type already set: its
// charset utf-8, whatever it was.
function withCharset(value) {
  const parts = String(value).split(';').map((p) => p.trim()).filter((p) => p !== '' && !/^charset=/i.test(p));
  if (parts.length === 0) return value;
  return [parts[0].toLowerCase(), ...parts.slice(1), 'charset=utf-8'].join('; ');
}

module.exports = { Request, Response, mediaType, decode, contentType, withCharset };

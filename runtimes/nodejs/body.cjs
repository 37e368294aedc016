'use strict';
// Reading a request body within the size limit, and turning it into Kyma's
// event.data and ce-* attributes (binary and structured CloudEvents).

const zlib = require('node:zlib');
const { mediaType, decode } = require('./express.cjs');
const { parseExtended, TooManyParameters } = require('./form.cjs');

class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function hasBody(req) {
  const h = req.headers;
  if (h['transfer-encoding'] !== undefined) return true;
  const cl = h['content-length'];
  return cl !== undefined && cl !== '0';
}

// Bytes of an oversized body read and thrown away after the 413, so that the
// client receives the answer instead of a connection reset (closing a socket
// with unread data makes the kernel reset it).
const DISCARD_LIMIT = 64 << 20;

// The Content-Encodings a body may come in, inflated before it is read, as
// body-parser (Kyma's runtimes) does.
const INFLATE = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
};

// readBody calls done(err, buffer), the body inflated when its
// Content-Encoding is gzip, deflate or br (another encoding is 415). err.status is 413 when the body
// (inflated) is over limit bytes: the answer can go out at once, the rest of the
// body is read and dropped (up to DISCARD_LIMIT more bytes, then the
// connection is destroyed), never kept in memory. err.close says the
// connection cannot be reused.
function readBody(req, limit, done) {
  const encoding = String(req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity') {
    readStream(req, req, Number(req.headers['content-length']), limit, done);
    return;
  }
  const inflate = INFLATE[encoding];
  if (inflate === undefined) {
    discard(req);
    done(new HTTPError(415, `unsupported content encoding "${encoding}"`));
    return;
  }
  const stream = inflate();
  req.pipe(stream);
  readStream(req, stream, NaN, limit, done);
}

// readStream reads the body from stream (req itself, or what inflates it),
// within limit bytes, declared the Content-Length of an identity body.
function readStream(req, stream, declared, limit, done) {
  if (declared > limit) {
    const err = new HTTPError(413, `request body of ${declared} bytes is over the limit of ${limit} bytes`);
    err.close = declared > limit + DISCARD_LIMIT;
    req.resume();
    done(err);
    return;
  }
  const chunks = [];
  let size = 0;
  let failed = false;
  const fail = (err) => {
    failed = true;
    chunks.length = 0;
    if (stream !== req) {
      // The rest is dropped as it comes, not inflated.
      req.unpipe(stream);
      stream.destroy();
    }
    discard(req);
    done(err);
  };
  stream.on('data', (chunk) => {
    if (failed) return;
    size += chunk.length;
    if (size > limit) {
      fail(new HTTPError(413, `request body is over the limit of ${limit} bytes`));
      return;
    }
    chunks.push(chunk);
  });
  stream.on('end', () => {
    if (!failed) done(null, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  });
  const onError = (err) => {
    if (failed) return;
    const e = new HTTPError(400, `read request body: ${err.message}`);
    e.close = true;
    fail(e);
  };
  stream.on('error', onError);
  if (stream !== req) req.on('error', onError);
}

// discard reads and drops what is left of req's body, destroying the
// connection past DISCARD_LIMIT bytes.
function discard(req) {
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > DISCARD_LIMIT) req.destroy();
  });
  req.resume();
}

// charsetOf is the charset parameter of a Content-Type, in lower case,
// '' without one.
function charsetOf(contentType) {
  if (!contentType) return '';
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
  }
  return '';
}

// The labels of ISO-8859-1, which Buffer decodes as it is (the WHATWG
// TextDecoder reads them as windows-1252).
const LATIN1 = new Set(['iso-8859-1', 'iso8859-1', 'latin1', 'l1', 'binary', 'iso_8859-1', 'cp819', 'ibm819']);

function unsupportedCharset(charset) {
  return new HTTPError(415, `unsupported charset "${charset.toUpperCase()}"`);
}

// decodeText is buf as text in charset (UTF-8 when ''), as body-parser's
// decoder leaves it: a byte-order mark dropped, bytes the charset cannot
// read replaced by U+FFFD. A charset this Node.js cannot decode is an
// HTTPError(415), body-parser's "unsupported charset".
function decodeText(buf, charset) {
  const label = charset || 'utf-8';
  if (LATIN1.has(label)) return buf.toString('latin1');
  let decoder;
  try {
    decoder = new TextDecoder(label);
  } catch {
    throw unsupportedCharset(label);
  }
  return decoder.decode(buf);
}

// parseJSON parses a JSON body in charset: a UTF (utf-8, utf-16le, ...)
// as body-parser's JSON parser takes, any other charset 415.
function parseJSON(buf, charset, what) {
  if (charset !== '' && !charset.startsWith('utf-')) throw unsupportedCharset(charset);
  const text = decodeText(buf, charset);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HTTPError(400, `malformed JSON in ${what}: ${err.message}`);
  }
}

// parseForm parses a urlencoded body in charset: UTF-8 or ISO-8859-1 (its
// escapes too), as body-parser's urlencoded parser (extended, qs) takes
// it (form.cjs); another charset is 415, more than 1,000 parameters 413.
function parseForm(buf, charset) {
  if (charset !== '' && charset !== 'utf-8' && charset !== 'iso-8859-1') throw unsupportedCharset(charset);
  const latin1 = charset === 'iso-8859-1';
  try {
    return parseExtended(decodeText(buf, charset), (s) => decode(s, latin1));
  } catch (err) {
    if (err instanceof TooManyParameters) throw new HTTPError(413, err.message);
    throw err;
  }
}

// decodeData turns a body of Content-Type contentType into event.data, as
// Kyma's body parsers do: application/json parsed (other *+json types,
// which Kyma's JSON parser is not given, are a Buffer), text/* as a
// string, urlencoded as an object, each in the charset it names (UTF-8
// without one), anything else as a Buffer.
function decodeData(contentType, buf) {
  if (buf === undefined) return undefined;
  const type = mediaType(contentType);
  const charset = charsetOf(contentType);
  if (type === 'application/json') return buf.length === 0 ? {} : parseJSON(buf, charset, 'request body');
  if (type.startsWith('text/')) return decodeText(buf, charset);
  if (type === 'application/x-www-form-urlencoded') return parseForm(buf, charset);
  return buf;
}

// fillEvent sets event.data, the ce-* attributes and req.body. It throws an
// HTTPError: 400 for malformed JSON, 415 for a charset its parser does not
// take.
function fillEvent(event, req, buf) {
  const headers = req.headers;
  const type = mediaType(headers['content-type']);
  if (type === 'application/cloudevents+json') {
    const envelope = buf === undefined || buf.length === 0 ? undefined : parseJSON(buf, charsetOf(headers['content-type']), 'structured CloudEvent');
    if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) {
      throw new HTTPError(400, 'a structured CloudEvent must be a JSON object');
    }
    for (const key of Object.keys(envelope)) {
      if (key !== 'data' && key !== 'data_base64') event[`ce-${key}`] = envelope[key];
    }
    event.data = envelope.data_base64 !== undefined && envelope.data === undefined
      ? Buffer.from(String(envelope.data_base64), 'base64')
      : envelope.data;
    req.body = envelope;
    return;
  }
  const data = decodeData(headers['content-type'], buf);
  if (headers['ce-type'] !== undefined && headers['ce-source'] !== undefined) {
    for (const key of Object.keys(headers)) {
      if (key.length > 3 && key.startsWith('ce-')) event[key] = decodeAttribute(headers[key]);
    }
    if (headers['content-type'] !== undefined) event['ce-datacontenttype'] = headers['content-type'];
  }
  event.data = data;
  req.body = data;
}

// requestBody is req.body of a request-API (nodejs26) call, as the body
// parsers of Kyma's runtime leave it: JSON (any JSON value) for
// application/json and application/cloudevents+json, a string for text/*,
// an object for a urlencoded form, a Buffer for anything else, undefined
// without a body. It throws an HTTPError: 400 for malformed JSON, 415 for
// a charset its parser does not take.
function requestBody(req, buf) {
  if (buf === undefined) return undefined;
  const contentType = req.headers['content-type'];
  if (mediaType(contentType) === 'application/cloudevents+json') {
    return buf.length === 0 ? {} : parseJSON(buf, charsetOf(contentType), 'request body');
  }
  return decodeData(contentType, buf);
}

// decodeAttribute undoes the percent-encoding the CloudEvents HTTP binding
// asks of a sender in binary mode (kfn's dispatcher writes space, ", %
// and non-ASCII as %XY): one round of decoding, so the handler reads the
// attribute as it was published. A value that is not valid
// percent-encoded UTF-8 ("100%", written raw by a sender that does not
// encode) is kept as it came.
function decodeAttribute(value) {
  if (typeof value !== 'string' || !value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

module.exports = { HTTPError, hasBody, readBody, fillEvent, decodeData, requestBody, decodeAttribute };

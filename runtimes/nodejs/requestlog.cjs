'use strict';
// The request log Kyma's Node.js runtimes write when asked to
// (SERVER_INTERNAL_LOGGER, or KYMA_INTERNAL_LOGGER_ENABLED for the older
// ones): one line per request on stdout, in Apache's combined format as
// morgan's 'combined' writes it, when the response is done.

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function pad2(n) {
  return n < 10 ? `0${n}` : String(n);
}

// clfDate is a date in the Common Log Format, in UTC.
function clfDate(d) {
  return `${pad2(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:` +
    `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())} +0000`;
}

// basicUser is the user name of a Basic Authorization header, if any.
function basicUser(header) {
  const m = /^ *[Bb][Aa][Ss][Ii][Cc] +([A-Za-z0-9._~+/-]+=*) *$/.exec(header || '');
  if (!m) return undefined;
  const pair = /^([^:]*):/.exec(Buffer.from(m[1], 'base64').toString());
  return pair ? pair[1] : undefined;
}

// line is the log line of a finished request.
function line(req, res, remote) {
  const sent = res.headersSent;
  const length = sent ? res.getHeader('content-length') : undefined;
  const fields = [
    remote || '-', '-', basicUser(req.headers.authorization) || '-', `[${clfDate(new Date())}]`,
    `"${req.method} ${req.originalUrl || req.url} HTTP/${req.httpVersionMajor}.${req.httpVersionMinor}"`,
    sent ? String(res.statusCode) : '-',
    (Array.isArray(length) ? length.join(', ') : length) || '-',
    `"${req.headers.referer || req.headers.referrer || '-'}"`,
    `"${req.headers['user-agent'] || '-'}"`,
  ];
  return fields.join(' ') + '\n';
}

// watch logs req once its response is done (or its connection closed).
// A body the host or the handler sends in one end() call gets its
// Content-Length set, as Express's res.send sets it, so the line shows
// its size.
function watch(req, res) {
  const remote = req.socket ? req.socket.remoteAddress : undefined;
  const end = res.end;
  res.end = function endWithLength(chunk, ...rest) {
    if (!res.headersSent && !res.hasHeader('content-length') && !res.hasHeader('transfer-encoding') && (typeof chunk === 'string' || chunk instanceof Uint8Array)) {
      const encoding = typeof rest[0] === 'string' ? rest[0] : 'utf8';
      res.setHeader('Content-Length', typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.length);
    }
    return end.call(this, chunk, ...rest);
  };
  let logged = false;
  const log = () => {
    if (logged) return;
    logged = true;
    process.stdout.write(line(req, res, remote));
  };
  res.once('finish', log);
  res.once('close', log);
}

module.exports = { watch, clfDate, basicUser };

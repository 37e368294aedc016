"""The HTTP/1.1 server: connections, requests, timeouts and draining."""

import socket
import sys
import threading
import time

from .bottleapi import Request as BottleRequest
from .event import Event, fill_event
from .httpio import Headers, HTTPError, http_date, reason
from .metrics import Metrics
from .request import Request, Response
from .requestapi import INTERNAL_ERROR, TIMEOUT_TEXT
from .requestlog import Entry
from .result import encode_result
from .tracing import NOOP_TRACER, Tracing
from . import standby
from . import propagation

MAX_LINE = 65536
MAX_HEADERS = 100
# Bytes of an oversized request body read and thrown away after the 413, so
# that the client receives the answer instead of a connection reset.
DISCARD_LIMIT = 64 << 20
# Seconds a connection may sit without progress (idle between keep-alive
# requests, or a stalled read or write) before it is closed. Longer than the
# usual client idle timeouts (Go: 90 s), like the Node.js host.
IDLE_TIMEOUT = 120
# Kyma's answer to a call when the handler could not be loaded.
NOT_LOADED = 'User function not loaded'


def is_ready_probe(target):
    """Whether a /healthz request asks for readiness (/healthz?ready): 200
    only once the handler is loaded. Plain /healthz is 200 while the host
    serves, loaded or not, as in Kyma."""
    query = target.partition('?')[2]
    return any(p.partition('=')[0] == 'ready' for p in query.split('&'))


def check_headers(headers):
    """Raise ValueError for a response header that cannot be sent: a line
    break (header injection) or a character outside Latin-1."""
    for name, value in headers:
        for text in (name, value):
            if '\r' in text or '\n' in text:
                raise ValueError('response header %r: line breaks are not allowed' % name)
            try:
                text.encode('latin-1')
            except UnicodeEncodeError:
                raise ValueError('response header %r: only Latin-1 characters are allowed' % name) from None


class Call:
    """One handler invocation; whoever settles it first (the handler thread or
    the watchdog at the deadline) writes the response."""

    __slots__ = ('conn', 'deadline', 'done', 'lock', 'request', 'start')

    def __init__(self, conn, request, deadline, start):
        self.conn = conn
        self.request = request
        self.deadline = deadline
        self.start = start
        self.done = False
        self.lock = threading.Lock()

    def settle(self):
        with self.lock:
            if self.done:
                return False
            self.done = True
            return True


class Watchdog:
    """Answers 408 for calls past FUNC_TIMEOUT. Deadlines arrive in order
    (one timeout for all calls), so the oldest active call is the next to
    expire and the watchdog sleeps exactly until then."""

    def __init__(self, server):
        self.server = server
        self.cond = threading.Condition(threading.Lock())
        self.active = {}

    def add(self, call):
        with self.cond:
            self.active[call] = None
            if len(self.active) == 1:
                self.cond.notify()

    def remove(self, call):
        with self.cond:
            self.active.pop(call, None)

    def run(self):
        cond = self.cond
        while True:
            with cond:
                while not self.active:
                    cond.wait()
                call = next(iter(self.active))
                wait = call.deadline - time.monotonic()
                if wait > 0:
                    cond.wait(wait)
                    continue
                del self.active[call]
            if call.settle():
                self.server.expire(call)


class Connection:
    __slots__ = ('sock', 'busy', 'closing', 'log')

    def __init__(self, sock):
        self.sock = sock
        self.busy = False
        self.closing = False
        # The request log's entry of the request being answered, when the
        # log is on (requestlog.Entry).
        self.log = None


class Server:
    def __init__(self, cfg, handler, load_error='', tracing=None, standby=None, prepare=None):
        self.request_api = cfg.api == 'request'
        # standby, for a host started with KFN_STANDBY_TOKEN_SHA256, loads
        # the Function a specialize request carries: standby(body) returns
        # (cfg, handler, load_error) or raises standby.SpecializeError.
        # Until then the host serves no Function (serve_standby).
        self.standby = standby
        # prepare, of a standby host, fetches the dependencies a prepare
        # request names: prepare(body) returns the answer's text or raises
        # standby.SpecializeError. It is taken once (prepare_taken) and a
        # specialize request waits for it (prepare_idle).
        self.prepare = prepare
        self.prepare_taken = False
        self.prepare_idle = threading.Event()
        self.prepare_idle.set()
        self.loading = False
        # Why a specialize request failed after the host took its
        # Function's files: the host then serves no Function at all.
        self.spent = ''

        self.become(cfg, handler, load_error)
        self.metrics = Metrics()
        self.tracing = tracing if tracing is not None else Tracing()
        self.watchdog = Watchdog(self)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.conns = {}
        self.busy = 0
        self.draining = False

    def become(self, cfg, handler, load_error):
        """Serve handler as the Function cfg describes."""
        self.cfg = cfg
        self.function_id = "%s/%s" % (cfg.namespace, cfg.function_name)
        # None when the handler could not be loaded; load_error says why.
        # For the request API (cfg.api), a requestapi.App.
        self.handler = handler
        self.load_error = load_error
        # bottle's MEMFILE_MAX, which Kyma's python312 sets to
        # FUNC_MEMFILE_MAX, bounds what request.json and .forms read.
        BottleRequest.MEMFILE_MAX = cfg.body_limit
        BottleRequest.server_port = str(cfg.port)
        self.context = {
            'function-name': cfg.function_name,
            'namespace': cfg.namespace,
            'timeout': cfg.timeout,
            'runtime': cfg.runtime,
            'memory-limit': cfg.memory_limit,
            'body-size-limit': cfg.body_limit,
        }

    # -- connection bookkeeping

    def begin(self, conn):
        with self.lock:
            conn.busy = True
            self.busy += 1
            if self.draining:
                conn.closing = True

    def end(self, conn):
        with self.lock:
            conn.busy = False
            self.busy -= 1
            if self.busy == 0:
                self.idle.notify_all()

    # -- response writing

    def respond(self, conn, status, headers, body, head=False, close=False, length=None):
        """Write an answer; length is its Content-Length when it is not
        len(body) (a HEAD answer whose body was never made)."""
        if conn.closing:
            close = True
        out = [b'HTTP/1.1 %d %s\r\nDate: ' % (status, reason(status).encode()), http_date()]
        for k, v in headers:
            out.append(b'\r\n%s: %s' % (k.encode('latin-1'), v.encode('latin-1')))
        out.append(b'\r\nContent-Length: %d' % (len(body) if length is None else length))
        if close:
            out.append(b'\r\nConnection: close')
            conn.closing = True
        out.append(b'\r\n\r\n')
        if not head:
            out.append(body)
        conn.sock.sendall(b''.join(out))
        entry = conn.log
        if entry is not None:
            conn.log = None
            entry.write(status, len(body) if length is None else length)

    def respond_text(self, conn, status, text, head=False, close=False):
        self.respond(conn, status, [('Content-Type', 'text/plain; charset=utf-8')], text.encode(), head, close)

    def expire(self, call):
        """Called by the watchdog for a call past its deadline."""
        conn = call.conn
        sys.stderr.write('kfn: function timed out after %ss: %s %s\n' % (
            self.cfg.timeout, call.request.method, call.request.path))
        self.metrics.observe(call.request.method, time.monotonic() - call.start, True)
        try:
            # Kyma's python314 returns the text from its Flask view (Flask's
            # type for a str); python312 returns bottle's HTTPError(408) of
            # the same text, which bottle shows in its HTML error page
            # (type and text kept, the page around it is bottle's own).
            ctype = 'text/html; charset=utf-8' if self.request_api else 'text/html; charset=UTF-8'
            self.respond(conn, 408, [('Content-Type', ctype)], TIMEOUT_TEXT.encode(), close=True)
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.end(conn)

    # -- request handling

    def serve_connection(self, sock, addr):
        conn = Connection(sock)
        with self.lock:
            if self.draining:
                sock.close()
                return
            self.conns[conn] = None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        sock.settimeout(IDLE_TIMEOUT)
        rfile = sock.makefile('rb', 65536)
        remote = addr[:2] if isinstance(addr, tuple) else ('', None)
        try:
            while not conn.closing:
                line = rfile.readline(MAX_LINE + 1)
                if not line:
                    break
                if line == b'\r\n' or line == b'\n':
                    continue
                self.begin(conn)
                if not self.serve_request(conn, rfile, line, remote):
                    break
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                self.conns.pop(conn, None)
            try:
                rfile.close()
                sock.close()
            except OSError:
                pass

    def serve_request(self, conn, rfile, line, remote):
        """Serve one request whose request line was read; begin() was called.
        Returns False when the connection must be closed."""
        ended = False
        try:
            parts = line.decode('latin-1').split()
            if len(parts) != 3 or not parts[2].startswith('HTTP/') or len(line) > MAX_LINE:
                raise HTTPError(400, 'malformed request line', close=True)
            method, target, version = parts
            headers = Headers()
            count = 0
            while True:
                h = rfile.readline(MAX_LINE + 1)
                if h == b'\r\n' or h == b'\n':
                    break
                if not h:
                    raise OSError('connection closed while reading headers')
                count += 1
                if count > MAX_HEADERS or len(h) > MAX_LINE:
                    raise HTTPError(431, 'request header fields too large', close=True)
                name, sep, value = h.partition(b':')
                if not sep:
                    raise HTTPError(400, 'malformed header line', close=True)
                name = name.strip().lower().decode('latin-1')
                value = value.strip().decode('latin-1')
                prev = dict.get(headers, name)
                dict.__setitem__(headers, name, value if prev is None else prev + ', ' + value)
            connection = dict.get(headers, 'connection', '').lower()
            if version == 'HTTP/1.1':
                if 'close' in connection:
                    conn.closing = True
            elif 'keep-alive' not in connection:
                conn.closing = True
            if target.startswith('http://') or target.startswith('https://'):
                slash = target.find('/', target.find('//') + 2)
                target = target[slash:] if slash != -1 else '/'
            if self.cfg.request_log:
                conn.log = Entry(remote[0], method, target, version, headers, not self.request_api)
            head = method == 'HEAD'
            if self.standby is not None:
                return self.serve_standby(conn, rfile, method, target, headers, head)
            if method == 'GET' or head:
                path = target.partition('?')[0]
                if path == '/healthz':
                    if self.draining:
                        self.respond_text(conn, 503, 'draining', head, close=True)
                    elif self.handler is None and is_ready_probe(target):
                        self.respond_text(conn, 500, '%s: %s' % (NOT_LOADED, self.load_error), head)
                    else:
                        # Names the Function, so that a probe of an address (the
                        # event bridge's early ready probe) knows whose pod it reached.
                        self.respond(conn, 200, [('Content-Type', 'text/plain; charset=utf-8'),
                                                 ('X-Kfn-Function', self.function_id)], b'OK', head)
                    return True
                if path == '/metrics':
                    self.respond(conn, 200, [('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')],
                                 self.metrics.render(), head)
                    return True
                if path == '/favicon.ico':
                    self.respond(conn, 204, [], b'', head)
                    return True
            body = self.read_body(conn, rfile, headers)
            # CORS preflights are answered by the host, as Kyma's runtimes
            # do, but for python314, whose handler gets OPTIONS itself.
            if method == 'OPTIONS' and 'access-control-request-method' in headers and not self.request_api:
                cors = [('Access-Control-Allow-Origin', '*'),
                        ('Access-Control-Allow-Methods', headers['access-control-request-method'])]
                if 'access-control-request-headers' in headers:
                    cors.append(('Access-Control-Allow-Headers', headers['access-control-request-headers']))
                self.respond(conn, 200, cors, b'')
                return True
            request = Request(method, target, version, headers, body, remote[0], remote[1])
            ended = True  # from here on, the call (or the watchdog) ends the request
            if self.request_api:
                return self.call_request(conn, request, head)
            return self.call(conn, request, head)
        except HTTPError as err:
            if not ended:
                self.respond_text(conn, err.status, str(err), close=err.close)
                if err.status == 413:
                    self.discard(conn, rfile)
            return not err.close
        finally:
            if not ended:
                self.end(conn)

    def serve_standby(self, conn, rfile, method, target, headers, head):
        """Serve a request to a standby host: health says "standby",
        readiness 503, POST /_kfn/specialize with the token loads a Function,
        anything else is answered 503."""
        path = target.partition('?')[0]
        if (method == 'GET' or head) and path == '/healthz':
            if self.draining:
                self.respond_text(conn, 503, 'draining', head, close=True)
            elif is_ready_probe(target):
                self.respond_text(conn, 503, 'standby: no Function loaded', head)
            else:
                self.respond_text(conn, 200, 'standby', head)
            return True
        # The answers below leave a request's body unread: the connection
        # is closed after them.
        prepare = method == 'POST' and path == standby.PREPARE_PATH and self.prepare is not None
        if not prepare and (method != 'POST' or path != standby.SPECIALIZE_PATH):
            self.respond(conn, 503, [('Content-Type', 'text/plain; charset=utf-8'), ('Retry-After', '1')],
                         b'standby: no Function loaded', head, close=True)
            return False
        if not standby.authorized(dict.get(headers, 'authorization'), self.cfg.standby_token_hash):
            self.respond(conn, 401, [('Content-Type', 'text/plain; charset=utf-8'), ('WWW-Authenticate', 'Bearer')],
                         b'prepare: the standby token is required' if prepare else b'specialize: the standby token is required', close=True)
            return False
        if prepare:
            return self.serve_prepare(conn, rfile, headers)
        with self.lock:
            if self.loading:
                raise HTTPError(409, 'specialize: a Function is being loaded', close=True)
            if self.spent:
                raise HTTPError(409, 'specialize: this host failed to load a Function and serves none: %s' % self.spent, close=True)
            self.loading = True
        try:
            body = self.read_body(conn, rfile, headers, standby.MAX_BYTES) or b''
            # A prepare request under way ends first (its fetch is bounded).
            self.prepare_idle.wait()
            try:
                cfg, handler, load_error = self.standby(body)
            except standby.SpecializeError as err:
                if err.spent:
                    self.spent = str(err)
                    sys.stderr.write('kfn: %s\n' % err)
                self.respond_text(conn, err.status, str(err))
                return True
            except Exception as err:  # a host bug: said, and the host stays on standby
                sys.stderr.write('kfn: specialize: %r\n' % err)
                self.respond_text(conn, 500, 'specialize: %s' % err)
                return True
            self.become(cfg, handler, load_error)
            self.standby = None
        finally:
            with self.lock:
                self.loading = False
        if handler is None:
            self.respond_text(conn, 500, '%s: %s' % (NOT_LOADED, load_error))
        else:
            self.respond(conn, 200, [('Content-Type', 'text/plain; charset=utf-8'), ('X-Kfn-Function', self.function_id)],
                         ('loaded %s' % self.function_id).encode())
        return True

    def serve_prepare(self, conn, rfile, headers):
        """Serve POST /_kfn/prepare: fetch the dependency set it names, once
        per host and before any Function is loaded: 200 when it is there, 404
        when the cache has none, 409 when the host prepared or loads already.
        A prepare that fails may be asked again."""
        with self.lock:
            if self.loading or self.spent or self.prepare_taken:
                raise HTTPError(409, 'prepare: this host prepared or loads a Function already', close=True)
            self.prepare_taken = True
            self.prepare_idle.clear()
        done = False
        try:
            body = self.read_body(conn, rfile, headers, standby.PREPARE_MAX_BYTES) or b''
            try:
                message = self.prepare(body)
            except standby.SpecializeError as err:
                self.respond_text(conn, err.status, str(err))
                return True
            except Exception as err:  # a host bug: said, and nothing is prepared
                sys.stderr.write('kfn: prepare: %r\n' % err)
                self.respond_text(conn, 500, 'prepare: %s' % err)
                return True
            done = True
        finally:
            with self.lock:
                if not done:
                    self.prepare_taken = False
            self.prepare_idle.set()
        self.respond_text(conn, 200, message)
        return True

    def read_body(self, conn, rfile, headers, limit=None):
        if limit is None:
            limit = self.cfg.body_limit
        te = dict.get(headers, 'transfer-encoding')
        cl = dict.get(headers, 'content-length')
        if te is not None:
            if te.lower() != 'chunked':
                raise HTTPError(501, 'unsupported transfer encoding %s' % te, close=True)
            self.continue_(conn, headers)
            return self.read_chunked(rfile, limit)
        if cl is None:
            return None
        try:
            n = int(cl)
        except ValueError:
            raise HTTPError(400, 'malformed Content-Length', close=True)
        if n < 0:
            raise HTTPError(400, 'malformed Content-Length', close=True)
        if n > limit:
            raise HTTPError(413, 'request body of %d bytes is over the limit of %d bytes' % (n, limit), close=True)
        if n == 0:
            return b''
        self.continue_(conn, headers)
        data = rfile.read(n)
        if len(data) != n:
            raise OSError('connection closed while reading the body')
        return data

    def continue_(self, conn, headers):
        if dict.get(headers, 'expect', '').lower() == '100-continue':
            conn.sock.sendall(b'HTTP/1.1 100 Continue\r\n\r\n')

    def read_chunked(self, rfile, limit):
        parts = []
        total = 0
        while True:
            line = rfile.readline(1024)
            try:
                size = int(line.split(b';', 1)[0].strip(), 16)
            except ValueError:
                raise HTTPError(400, 'malformed chunked body', close=True)
            if size == 0:
                while True:
                    t = rfile.readline(MAX_LINE)
                    if t in (b'\r\n', b'\n', b''):
                        break
                return b''.join(parts)
            total += size
            if total > limit:
                raise HTTPError(413, 'request body is over the limit of %d bytes' % limit, close=True)
            chunk = rfile.read(size)
            if len(chunk) != size:
                raise OSError('connection closed while reading the body')
            parts.append(chunk)
            rfile.readline(3)

    def discard(self, conn, rfile):
        """After a 413, read and drop what the client still sends (up to a
        bound), so that it receives the answer rather than a reset."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.settimeout(2)
            left = DISCARD_LIMIT
            while left > 0:
                chunk = rfile.read1(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def call(self, conn, request, head):
        """Run the handler for request and answer it. The request is always
        ended exactly once: here, or by the watchdog at the deadline."""
        if self.handler is None:
            return self.not_loaded(conn, request, head)
        response = Response()
        response.headers.append(('Access-Control-Allow-Origin', '*'))
        scope = self.tracing.scope(request)
        event = Event(request, response, scope.tracer if scope is not None else NOOP_TRACER, scope)
        try:
            fill_event(event, request)
        except HTTPError as err:
            if scope is not None:
                scope.end(err.status)
            try:
                self.respond_text(conn, err.status, str(err), head)
            finally:
                self.end(conn)
            return True
        return self.run_call(conn, request, head, scope, lambda: self.run_handler(event, response) + (None,))

    def call_request(self, conn, request, head):
        """Run a request-API handler (main() in Flask) for request and
        answer it, as call does."""
        if self.handler is None:
            return self.not_loaded(conn, request, head)
        scope = self.tracing.scope(request)
        import sdk

        def run():
            sdk._enter(request, scope)
            try:
                return self.run_app(request)
            finally:
                sdk._leave()
        return self.run_call(conn, request, head, scope, run)

    def not_loaded(self, conn, request, head):
        """Answer a call while the handler could not be loaded, as Kyma does."""
        self.metrics.observe(request.method, 0, True)
        try:
            self.respond_text(conn, 500, NOT_LOADED, head)
        finally:
            self.end(conn)
        return True

    def run_call(self, conn, request, head, scope, run):
        """Run one call under the watchdog and in its span, and answer it
        with what run returns: (status, headers, body, error, length),
        length None for len(body). Returns whether the connection stays
        open."""
        start = time.monotonic()
        call = Call(conn, request, start + self.cfg.timeout, start)
        self.watchdog.add(call)
        if scope is not None:
            scope.attach()
        trace = propagation.enter(request, scope)
        try:
            status, headers, body, error, length = run()
        finally:
            propagation.leave(trace)
            # A line the handler left without a newline is written now,
            # as a line, not held until this thread prints again.
            for stream in (sys.stdout, sys.stderr):
                end_line = getattr(stream, 'end_line', None)
                if end_line:
                    end_line()
            if scope is not None:
                scope.detach()
            self.watchdog.remove(call)
        if not call.settle():
            return False  # the watchdog answered 408 and closed the connection
        self.metrics.observe(request.method, time.monotonic() - start, error is not None)
        if scope is not None:
            scope.end(status, str(error) if error is not None else None)
        try:
            self.respond(conn, status, headers, body, head, length=length)
        finally:
            self.end(conn)
        return not conn.closing

    def run_app(self, request):
        """Run the handler's Flask app; never raises. Returns (status,
        headers, body, error, length), error what main() raised, or None."""
        try:
            status, headers, body, length, error = self.handler.call(request)
            check_headers(headers)
            return status, headers, body, error, length
        except BaseException as err:  # the app itself failed, or a header cannot be sent
            import traceback
            sys.stderr.write('kfn: function failed:\n' + ''.join(traceback.format_exception(err)))
            body = INTERNAL_ERROR.encode()
            return 500, [('Content-Type', 'text/plain; charset=utf-8')], body, err, len(body)

    def run_handler(self, event, response):
        """Call the handler and encode its answer; never raises. Returns
        (status, headers, body, error), error None unless the call failed."""
        try:
            result = self.handler(event, dict(self.context))
            status, headers, body = encode_result(result, response)
            check_headers(headers)
            return status, headers, body, None
        except BaseException as err:  # a handler's sys.exit() must not end the request unanswered
            if hasattr(err, 'status_code') and hasattr(err, 'body'):
                # bottle.HTTPError / abort(): an answer, not a crash.
                try:
                    status, headers, body = encode_result(err, response)
                    check_headers(headers)
                    return status, headers, body, (err if status >= 500 else None)
                except Exception as encode_err:
                    err = encode_err
            import traceback
            sys.stderr.write('kfn: function failed:\n' + ''.join(traceback.format_exception(err)))
            # Kyma's python312 answers its error handler's text with
            # bottle's default type.
            return 500, [('Content-Type', 'text/html; charset=UTF-8')], b'Internal server error', err

    # -- lifecycle

    def drain(self):
        """Stop serving: close idle connections, let busy ones finish their
        request, and return when none is busy (or after the timeout)."""
        with self.lock:
            self.draining = True
            for conn in list(self.conns):
                conn.closing = True
                if not conn.busy:
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            print('kfn: draining %d in-flight request(s)' % self.busy, flush=True)
            deadline = time.monotonic() + self.cfg.timeout + 5
            while self.busy > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    sys.stderr.write('kfn: drain did not finish in time\n')
                    return False
                self.idle.wait(left)
        return True

"""kfn Python function host: serves a Kyma handler, main(event, context), over HTTP.

Standard library only. One thread per connection (handlers are ordinary
blocking functions), HTTP/1.1 keep-alive, TCP_NODELAY, no per-request logging.
The contract (environment, routes, signals) is documented in runtimes/README.md.
"""

import importlib
import json
import os
import signal
import socket
import sys
import threading
import time

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180)
MAX_LINE = 65536
MAX_HEADERS = 100
# Bytes of an oversized request body read and thrown away after the 413, so
# that the client receives the answer instead of a connection reset.
DISCARD_LIMIT = 64 << 20
TRACE_HEADERS = (
    'traceparent', 'tracestate', 'baggage', 'x-request-id', 'b3',
    'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags',
)
HOST_MODULES = ('kfn_runtime', 'kfn_main')


class ConfigError(Exception):
    """A configuration value from the environment is invalid."""


def _number(env, name, default, minimum, integer=False):
    raw = env.get(name, '')
    if raw == '':
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or value != value:
        kind = 'an integer' if integer else 'a number'
        raise ConfigError('invalid %s=%r: want %s >= %s' % (name, raw, kind, minimum))
    return value


class Config:
    """The host's settings, read from the environment."""

    def __init__(self, env):
        self.function_name = env.get('FUNC_NAME', '')
        self.namespace = env.get('SERVICE_NAMESPACE', '')
        self.runtime = env.get('FUNC_RUNTIME', '')
        self.port = _number(env, 'FUNC_PORT', 8080, 0, integer=True)
        self.listen_fd = _number(env, 'KFN_LISTEN_FD', None, 3, integer=True)
        self.function_dir = os.path.abspath(env.get('KFN_FUNCTION_DIR') or '/usr/src/app/function')
        deps = env.get('KFN_DEPS_DIR', '')
        self.deps_dir = os.path.abspath(deps) if deps else ''
        self.module_name = env.get('MOD_NAME') or 'handler'
        self.handler_name = env.get('FUNC_HANDLER') or 'main'
        self.timeout = _number(env, 'FUNC_TIMEOUT', 180.0, 0.001)
        self.body_limit_mb = _number(env, 'REQ_MB_LIMIT', 1.0, 0.000001)
        self.body_limit = max(1, int(self.body_limit_mb * 1024 * 1024))
        self.memory_limit = env.get('FUNC_MEMORY_LIMIT')
        self.publisher = env.get('PUBLISHER_PROXY_ADDRESS', '')
        self.trace_endpoint = env.get('TRACE_COLLECTOR_ENDPOINT', '')
        if self.module_name in HOST_MODULES:
            raise ConfigError('MOD_NAME=%s is the name of a host module' % self.module_name)


# ---------------------------------------------------------------- HTTP basics

class HTTPError(Exception):
    """An error answered with its status code and message."""

    def __init__(self, status, message, close=False):
        Exception.__init__(self, message)
        self.status = status
        self.close = close


_reasons = {}


def reason(status):
    phrase = _reasons.get(status)
    if phrase is None:
        from http import HTTPStatus
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = 'Status %d' % status
        _reasons[status] = phrase
    return phrase


_DAYS = ('Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun')
_MONTHS = ('', 'Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec')
_date = [0, b'']


def http_date():
    now = int(time.time())
    if now != _date[0]:
        t = time.gmtime(now)
        _date[1] = ('%s, %02d %s %d %02d:%02d:%02d GMT' % (
            _DAYS[t.tm_wday], t.tm_mday, _MONTHS[t.tm_mon], t.tm_year, t.tm_hour, t.tm_min, t.tm_sec,
        )).encode()
        _date[0] = now
    return _date[1]


def media_type(content_type):
    if not content_type:
        return ''
    return content_type.split(';', 1)[0].strip().lower()


def _unquote(s):
    if '+' in s:
        s = s.replace('+', ' ')
    if '%' not in s:
        return s
    from urllib.parse import unquote
    return unquote(s)


class Headers(dict):
    """Request headers: a dict with lower-case names, looked up case-insensitively."""

    def __getitem__(self, key):
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key):
        return dict.__contains__(self, key.lower())

    def get(self, key, default=None):
        return dict.get(self, key.lower(), default)

    def getall(self, key):
        value = dict.get(self, key.lower())
        return [] if value is None else [value]


class FormsDict(dict):
    """Query or form values like bottle's FormsDict: the last value of a key by
    item or attribute access ('' when missing), all of them with getall()."""

    def __init__(self):
        dict.__init__(self)
        self._all = {}

    def add(self, key, value):
        self._all.setdefault(key, []).append(value)
        dict.__setitem__(self, key, value)

    def getall(self, key):
        return list(self._all.get(key, ()))

    def getone(self, key, default=None):
        return dict.get(self, key, default)

    def getunicode(self, key, default=None):
        return dict.get(self, key, default)

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return dict.get(self, name, '')

    def allitems(self):
        return [(k, v) for k, vs in self._all.items() for v in vs]


def parse_query(qs):
    out = FormsDict()
    if qs:
        for part in qs.split('&'):
            if not part:
                continue
            key, _, value = part.partition('=')
            out.add(_unquote(key), _unquote(value))
    return out


# ------------------------------------------------------------ request/response

class Request:
    """The HTTP request, shaped like the bottle request Kyma's Python runtime
    passed as event['extensions']['request']."""

    def __init__(self, method, target, version, headers, body, remote_addr):
        self.method = method
        path, _, qs = target.partition('?')
        self.path = path
        self.query_string = qs
        self.version = version
        self.headers = headers
        self._body = body
        self.remote_addr = remote_addr
        self._query = None
        self._json = self
        self._forms = None
        self._cookies = None

    @property
    def fullpath(self):
        return self.path

    @property
    def url(self):
        scheme = self.headers.get('x-forwarded-proto', 'http').split(',')[0].strip()
        host = self.headers.get('x-forwarded-host') or self.headers.get('host', '')
        return '%s://%s%s%s' % (scheme, host, self.path, '?' + self.query_string if self.query_string else '')

    @property
    def query(self):
        if self._query is None:
            self._query = parse_query(self.query_string)
        return self._query

    GET = query

    @property
    def forms(self):
        if self._forms is None:
            if media_type(self.content_type) == 'application/x-www-form-urlencoded' and self._body:
                self._forms = parse_query(self._body.decode('utf-8', 'replace'))
            else:
                self._forms = FormsDict()
        return self._forms

    POST = forms

    @property
    def params(self):
        out = FormsDict()
        for k, v in self.query.allitems():
            out.add(k, v)
        for k, v in self.forms.allitems():
            out.add(k, v)
        return out

    @property
    def body(self):
        """A fresh file-like object over the raw body bytes."""
        import io
        return io.BytesIO(self._body or b'')

    @property
    def data(self):
        """The raw body bytes."""
        return self._body or b''

    @property
    def json(self):
        """The body parsed as JSON for a JSON content type, else None."""
        if self._json is self:
            mt = media_type(self.content_type)
            if self._body and (mt == 'application/json' or mt.endswith('+json')):
                self._json = json.loads(self._body)
            else:
                self._json = None
        return self._json

    @property
    def content_type(self):
        return self.headers.get('content-type', '')

    @property
    def content_length(self):
        return len(self._body) if self._body is not None else 0

    @property
    def cookies(self):
        if self._cookies is None:
            from http.cookies import SimpleCookie
            jar = SimpleCookie()
            try:
                jar.load(self.headers.get('cookie', ''))
            except Exception:
                pass
            self._cookies = FormsDict()
            for name, morsel in jar.items():
                self._cookies.add(name, morsel.value)
        return self._cookies

    def get_cookie(self, name, default=None):
        return self.cookies.getone(name, default)

    def get_header(self, name, default=None):
        return self.headers.get(name, default)

    @property
    def is_xhr(self):
        return self.headers.get('x-requested-with', '').lower() == 'xmlhttprequest'

    @property
    def environ(self):
        """A WSGI-style environ dict for code written against WSGI requests."""
        env = {
            'REQUEST_METHOD': self.method,
            'PATH_INFO': self.path,
            'QUERY_STRING': self.query_string,
            'SERVER_PROTOCOL': self.version,
            'REMOTE_ADDR': self.remote_addr,
            'CONTENT_TYPE': self.headers.get('content-type', ''),
            'CONTENT_LENGTH': str(self.content_length),
        }
        for k, v in self.headers.items():
            env['HTTP_' + k.upper().replace('-', '_')] = v
        return env


class Response:
    """What the handler can set besides its return value:
    event['extensions']['response'].status / .set_header() / .content_type."""

    def __init__(self):
        self.status = 200
        self.headers = []

    @property
    def status_code(self):
        return self.status

    def set_header(self, name, value):
        lname = name.lower()
        self.headers = [h for h in self.headers if h[0].lower() != lname]
        self.headers.append((name, str(value)))

    def add_header(self, name, value):
        self.headers.append((name, str(value)))

    def get_header(self, name, default=None):
        lname = name.lower()
        for k, v in reversed(self.headers):
            if k.lower() == lname:
                return v
        return default

    @property
    def content_type(self):
        return self.get_header('Content-Type')

    @content_type.setter
    def content_type(self, value):
        self.set_header('Content-Type', value)


# ---------------------------------------------------------------- the event

class CloudEventError(RuntimeError):
    """emitCloudEvent failed; .response is set when the publisher answered."""

    def __init__(self, message, response=None):
        RuntimeError.__init__(self, message)
        self.response = response


class PublisherResponse:
    """The publisher's answer to emitCloudEvent."""

    def __init__(self, status, reason_, headers, content):
        self.status_code = status
        self.status = status
        self.reason = reason_
        self.headers = headers
        self.content = content

    @property
    def text(self):
        return self.content.decode('utf-8', 'replace')

    @property
    def ok(self):
        return 200 <= self.status_code < 300


_CE_ATTRIBUTE = frozenset('abcdefghijklmnopqrstuvwxyz0123456789')
_emit_settings = {'publisher': '', 'timeout': 30.0}


def _default_content_type(data):
    if data is None:
        return None
    if isinstance(data, str):
        return 'text/plain'
    if isinstance(data, (bytes, bytearray, memoryview)):
        return 'application/octet-stream'
    return 'application/json'


def _encode_data(data, content_type):
    if data is None:
        return None
    if isinstance(data, str):
        return data.encode('utf-8')
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if content_type is None or 'json' in content_type.lower():
        return json.dumps(data, default=str).encode('utf-8')
    return str(data).encode('utf-8')


class Event(dict):
    """The event handed to main(event, context): a dict with 'data', the 'ce-*'
    attributes of a CloudEvent and 'extensions' (request, response)."""

    def __init__(self, request, response, tracer, scope):
        dict.__init__(self)
        self['extensions'] = {'request': request, 'response': response}
        self.tracer = tracer
        self._scope = scope

    @property
    def ceHeaders(self):
        return self

    def setResponseHeader(self, key, value):
        self['extensions']['response'].set_header(key, value)

    def setResponseContentType(self, content_type):
        self['extensions']['response'].set_header('Content-Type', content_type)

    def setResponseStatus(self, status):
        self['extensions']['response'].status = int(status)

    def emitCloudEvent(self, type, source, data, optionalCloudEventAttributes=None):
        """POST a binary-mode CloudEvent to PUBLISHER_PROXY_ADDRESS, passing the
        request's trace context on. Returns the publisher's response on 2xx and
        raises CloudEventError otherwise."""
        publisher = _emit_settings['publisher']
        if not publisher:
            raise CloudEventError('emitCloudEvent: PUBLISHER_PROXY_ADDRESS is not set')
        if not isinstance(type, str) or not type:
            raise ValueError('emitCloudEvent: type must be a non-empty string')
        if not isinstance(source, str) or not source:
            raise ValueError('emitCloudEvent: source must be a non-empty string')
        headers = {'ce-specversion': '1.0', 'ce-type': type, 'ce-source': source}
        content_type = None
        for name, value in (optionalCloudEventAttributes or {}).items():
            if value is None:
                continue
            key = name.lower()
            if key in ('specversion', 'type', 'source', 'data'):
                continue
            if key == 'datacontenttype':
                content_type = str(value)
                continue
            if not key or len(key) > 20 or not set(key) <= _CE_ATTRIBUTE:
                raise ValueError('emitCloudEvent: invalid CloudEvent attribute name %r' % name)
            headers['ce-' + key] = value.isoformat() if hasattr(value, 'isoformat') else str(value)
        if 'ce-id' not in headers:
            import uuid
            headers['ce-id'] = str(uuid.uuid4())
        if 'ce-time' not in headers:
            now = time.time()
            headers['ce-time'] = time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now)) + '.%03dZ' % (int(now * 1000) % 1000)
        if content_type is None:
            content_type = _default_content_type(data)
        body = _encode_data(data, content_type)
        if content_type is not None:
            headers['Content-Type'] = content_type
        if self._scope is not None:
            self._scope.inject(headers)
        else:
            incoming = self['extensions']['request'].headers
            for h in TRACE_HEADERS:
                v = incoming.get(h)
                if v is not None:
                    headers[h] = v
        return _post(publisher, headers, body)

    def publishCloudEvent(self, data):
        """Deprecated in Kyma: publish a CloudEvent given as a dict."""
        ce = dict(data or {})
        return self.emitCloudEvent(ce.pop('type', None), ce.pop('source', None), ce.pop('data', None), ce)

    def buildResponseCloudEvent(self, event_id, event_type, event_data):
        """Deprecated in Kyma: a CloudEvent dict answering this event."""
        return {
            'type': event_type,
            'source': self.get('ce-source'),
            'eventtypeversion': self.get('ce-eventtypeversion'),
            'specversion': self.get('ce-specversion'),
            'id': event_id,
            'data': event_data,
            'datacontenttype': _default_content_type(event_data),
        }


def _post(address, headers, body):
    from urllib.parse import urlsplit
    import http.client
    url = urlsplit(address)
    if url.scheme == 'https':
        conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=_emit_settings['timeout'])
    elif url.scheme == 'http':
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=_emit_settings['timeout'])
    else:
        raise CloudEventError('emitCloudEvent: PUBLISHER_PROXY_ADDRESS %r is not an http(s) URL' % address)
    path = (url.path or '/') + ('?' + url.query if url.query else '')
    try:
        conn.request('POST', path, body=body, headers=headers)
        r = conn.getresponse()
        resp = PublisherResponse(r.status, r.reason, dict(r.getheaders()), r.read())
    except OSError as err:
        raise CloudEventError('emitCloudEvent: POST %s: %s' % (address, err)) from err
    finally:
        conn.close()
    if not resp.ok:
        raise CloudEventError('emitCloudEvent: publisher answered %d %s: %s' % (
            resp.status_code, resp.reason, resp.text[:512]), resp)
    return resp


def fill_event(event, request):
    """Set event['data'] and the ce-* attributes; raise HTTPError(400) on
    malformed JSON."""
    headers = request.headers
    body = request._body
    ct = headers.get('content-type')
    mt = media_type(ct)
    if mt == 'application/cloudevents+json':
        try:
            envelope = json.loads(body) if body else None
        except ValueError as err:
            raise HTTPError(400, 'malformed JSON in structured CloudEvent: %s' % err)
        if not isinstance(envelope, dict):
            raise HTTPError(400, 'a structured CloudEvent must be a JSON object')
        for k, v in envelope.items():
            if k not in ('data', 'data_base64'):
                event['ce-' + k] = v
        if 'data' not in envelope and 'data_base64' in envelope:
            import base64
            event['data'] = base64.b64decode(envelope['data_base64'])
        else:
            event['data'] = envelope.get('data')
        request._json = envelope
        return
    event['data'] = decode_data(mt, body, request)
    if 'ce-type' in headers and 'ce-source' in headers:
        for k, v in headers.items():
            if k.startswith('ce-') and len(k) > 3:
                event[k] = v
        if ct is not None:
            event['ce-datacontenttype'] = ct


def decode_data(mt, body, request):
    if body is None:
        return None
    if mt == 'application/json' or mt.endswith('+json'):
        if not body:
            request._json = None
            return None
        try:
            value = json.loads(body)
        except ValueError as err:
            raise HTTPError(400, 'malformed JSON in request body: %s' % err)
        request._json = value
        return value
    if mt.startswith('text/'):
        return body.decode('utf-8', 'replace')
    if mt == 'application/x-www-form-urlencoded':
        return request.forms
    return body


# ----------------------------------------------------------------- tracing

class _NoopSpan:
    def set_attribute(self, *a, **k):
        return None

    set_attributes = add_event = set_status = update_name = record_exception = add_link = set_attribute

    def end(self, *a, **k):
        return None

    def is_recording(self):
        return False

    def get_span_context(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class NoopTracer:
    """event.tracer when tracing is off: every span is a no-op."""

    _span = _NoopSpan()

    def start_span(self, *a, **k):
        return self._span

    def start_as_current_span(self, *a, **k):
        return self._span


NOOP_TRACER = NoopTracer()


class Tracing:
    """OpenTelemetry, loaded after the host listens and only when
    TRACE_COLLECTOR_ENDPOINT is set and the SDK is installed."""

    def __init__(self):
        self.otel = None

    def start(self, cfg):
        try:
            from opentelemetry import context, propagate, trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as err:
            return 'tracing disabled: load OpenTelemetry SDK: %s' % err
        attrs = {'service.name': cfg.function_name or 'function'}
        if cfg.namespace:
            attrs['k8s.namespace.name'] = cfg.namespace
        provider = TracerProvider(resource=Resource.create(attrs))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=cfg.trace_endpoint), schedule_delay_millis=1000))
        trace.set_tracer_provider(provider)
        self.otel = (context, propagate, trace, provider, provider.get_tracer('io.kfn.runtime'))
        return None

    def scope(self, request):
        if self.otel is None:
            return None
        return _Scope(self.otel, request)

    def shutdown(self):
        if self.otel is not None:
            try:
                self.otel[3].shutdown()
            except Exception:
                pass


class _Scope:
    def __init__(self, otel, request):
        context, propagate, trace, _, tracer = otel
        self._context = context
        self._propagate = propagate
        parent = propagate.extract(dict(request.headers))
        self.span = tracer.start_span('%s %s' % (request.method, request.path), context=parent,
                                      kind=trace.SpanKind.SERVER)
        self.ctx = trace.set_span_in_context(self.span, parent)
        self.tracer = tracer
        self._trace = trace
        self._token = None

    def attach(self):
        self._token = self._context.attach(self.ctx)

    def detach(self):
        if self._token is not None:
            self._context.detach(self._token)
            self._token = None

    def inject(self, headers):
        self._propagate.inject(headers, context=self.ctx)

    def end(self, status, message=None):
        self.span.set_attribute('http.response.status_code', status)
        if status >= 500 or status == 408:
            from opentelemetry.trace import Status, StatusCode
            self.span.set_status(Status(StatusCode.ERROR, message))
        self.span.end()


# ----------------------------------------------------------------- metrics

class Metrics:
    """Calls, failures and a duration histogram in the Prometheus text format."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.sum = 0.0
        self.counts = [0] * (len(BUCKETS) + 1)

    def observe(self, seconds, failed):
        i = 0
        n = len(BUCKETS)
        while i < n and seconds > BUCKETS[i]:
            i += 1
        with self.lock:
            self.calls += 1
            if failed:
                self.failures += 1
            self.sum += seconds
            self.counts[i] += 1

    def render(self):
        with self.lock:
            calls, failures, total, counts = self.calls, self.failures, self.sum, list(self.counts)
        lines = [
            '# HELP function_calls_total Number of calls to the user function.',
            '# TYPE function_calls_total counter',
            'function_calls_total %d' % calls,
            '# HELP function_failures_total Number of user function calls that raised or timed out.',
            '# TYPE function_failures_total counter',
            'function_failures_total %d' % failures,
            '# HELP function_duration_seconds Duration of user function calls in seconds.',
            '# TYPE function_duration_seconds histogram',
        ]
        cumulative = 0
        for b, c in zip(BUCKETS, counts):
            cumulative += c
            lines.append('function_duration_seconds_bucket{le="%s"} %d' % (b, cumulative))
        cumulative += counts[-1]
        lines.append('function_duration_seconds_bucket{le="+Inf"} %d' % cumulative)
        lines.append('function_duration_seconds_sum %r' % total)
        lines.append('function_duration_seconds_count %d' % cumulative)
        return ('\n'.join(lines) + '\n').encode()


# ---------------------------------------------------------- result encoding

def encode_result(value, response):
    """Turn a handler's return value into (status, headers, body) the way
    Kyma's bottle-based runtime does: dict (and list) -> JSON, str -> body,
    None -> empty, bottle-style HTTPResponse objects -> their status and body."""
    status = response.status
    headers = response.headers
    ctype = None
    if value is None:
        body = b''
    elif isinstance(value, str):
        body = value.encode('utf-8')
    elif isinstance(value, (bytes, bytearray, memoryview)):
        body = bytes(value)
    elif isinstance(value, (dict, list, tuple)):
        body = json.dumps(value).encode('utf-8')
        ctype = 'application/json'
    elif hasattr(value, 'status_code') and hasattr(value, 'body'):
        status = int(value.status_code)
        extra = getattr(value, 'headerlist', None)
        if extra is None:
            h = getattr(value, 'headers', None)
            extra = list(h.items()) if h is not None else []
        headers = headers + [(k, str(v)) for k, v in extra]
        _, more_headers, body = encode_result(value.body, Response())
        headers = headers + [h for h in more_headers if h[0].lower() == 'content-type' and
                             not any(x[0].lower() == 'content-type' for x in headers)]
        return status, headers, body
    elif hasattr(value, 'read'):
        body = value.read()
        if isinstance(body, str):
            body = body.encode('utf-8')
    elif isinstance(value, (int, float, bool)):
        body = str(value).encode('utf-8')
    elif hasattr(value, '__iter__'):
        parts = []
        for chunk in value:
            parts.append(chunk.encode('utf-8') if isinstance(chunk, str) else bytes(chunk))
        body = b''.join(parts)
    else:
        body = str(value).encode('utf-8')
    if not any(h[0].lower() == 'content-type' for h in headers):
        headers = headers + [('Content-Type', ctype or 'text/html; charset=UTF-8')]
    return status, headers, body


# ---------------------------------------------------------------- the server

class _Drain(BaseException):
    pass


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
    __slots__ = ('sock', 'busy', 'closing')

    def __init__(self, sock):
        self.sock = sock
        self.busy = False
        self.closing = False


class Server:
    def __init__(self, cfg, handler):
        self.cfg = cfg
        self.handler = handler
        self.metrics = Metrics()
        self.tracing = Tracing()
        self.watchdog = Watchdog(self)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.conns = {}
        self.busy = 0
        self.draining = False
        self.context = {
            'function-name': cfg.function_name,
            'namespace': cfg.namespace,
            'timeout': cfg.timeout,
            'runtime': cfg.runtime,
            'memory-limit': cfg.memory_limit,
            'body-size-limit': cfg.body_limit_mb,
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

    def respond(self, conn, status, headers, body, head=False, close=False):
        if conn.closing:
            close = True
        out = [b'HTTP/1.1 %d %s\r\nDate: ' % (status, reason(status).encode()), http_date()]
        for k, v in headers:
            out.append(b'\r\n%s: %s' % (k.encode('latin-1'), v.encode('latin-1')))
        out.append(b'\r\nContent-Length: %d' % len(body))
        if close:
            out.append(b'\r\nConnection: close')
            conn.closing = True
        out.append(b'\r\n\r\n')
        if not head:
            out.append(body)
        conn.sock.sendall(b''.join(out))

    def respond_text(self, conn, status, text, head=False, close=False):
        self.respond(conn, status, [('Content-Type', 'text/plain; charset=utf-8')], text.encode(), head, close)

    def expire(self, call):
        """Called by the watchdog for a call past its deadline."""
        conn = call.conn
        sys.stderr.write('kfn: function timed out after %ss: %s %s\n' % (
            self.cfg.timeout, call.request.method, call.request.path))
        self.metrics.observe(time.monotonic() - call.start, True)
        try:
            self.respond_text(conn, 408, 'Request Timeout', close=True)
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
        rfile = sock.makefile('rb', 65536)
        remote = addr[0] if isinstance(addr, tuple) else ''
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
            head = method == 'HEAD'
            if method == 'GET' or head:
                path = target.partition('?')[0]
                if path == '/healthz':
                    if self.draining:
                        self.respond_text(conn, 503, 'draining', head, close=True)
                    else:
                        self.respond(conn, 200, [('Content-Type', 'text/plain; charset=utf-8')], b'OK', head)
                    return True
                if path == '/metrics':
                    self.respond(conn, 200, [('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')],
                                 self.metrics.render(), head)
                    return True
                if path == '/favicon.ico':
                    self.respond(conn, 204, [], b'', head)
                    return True
            body = self.read_body(conn, rfile, headers)
            if method == 'OPTIONS' and 'access-control-request-method' in headers:
                cors = [('Access-Control-Allow-Origin', '*'),
                        ('Access-Control-Allow-Methods', headers['access-control-request-method'])]
                if 'access-control-request-headers' in headers:
                    cors.append(('Access-Control-Allow-Headers', headers['access-control-request-headers']))
                self.respond(conn, 200, cors, b'')
                return True
            request = Request(method, target, version, headers, body, remote)
            ended = True  # from here on, the call (or the watchdog) ends the request
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

    def read_body(self, conn, rfile, headers):
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
        cfg = self.cfg
        response = Response()
        response.headers.append(('Access-Control-Allow-Origin', '*'))
        scope = self.tracing.scope(request)
        event = Event(request, response, scope.tracer if scope is not None else NOOP_TRACER, scope)
        try:
            fill_event(event, request)
        except HTTPError as err:
            if scope is not None:
                scope.end(err.status)
            self.respond_text(conn, err.status, str(err), head)
            self.end(conn)
            return True
        start = time.monotonic()
        call = Call(conn, request, start + cfg.timeout, start)
        self.watchdog.add(call)
        failed = False
        if scope is not None:
            scope.attach()
        try:
            result = self.handler(event, self.context)
            status, headers, body = encode_result(result, response)
        except Exception as err:
            failed = True
            error = err
            if hasattr(err, 'status_code') and hasattr(err, 'body'):
                # bottle.HTTPError / abort(): an answer, not a crash.
                status, headers, body = encode_result(err, response)
                failed = status >= 500
            else:
                import traceback
                sys.stderr.write('kfn: function failed:\n' + traceback.format_exc())
                status, headers, body = 500, [('Content-Type', 'text/plain; charset=utf-8')], b'Internal server error'
        finally:
            if scope is not None:
                scope.detach()
        self.watchdog.remove(call)
        if not call.settle():
            return False  # the watchdog answered 408 and closed the connection
        self.metrics.observe(time.monotonic() - start, failed)
        if scope is not None:
            scope.end(status, str(error) if failed else None)
        try:
            self.respond(conn, status, headers, body, head)
        finally:
            self.end(conn)
        return not conn.closing

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


def listen(cfg):
    if cfg.listen_fd is not None:
        sock = socket.socket(fileno=cfg.listen_fd)
        sock.listen(1024)
        return sock
    if socket.has_dualstack_ipv6():
        return socket.create_server(('', cfg.port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
    return socket.create_server(('', cfg.port), backlog=1024)


def load_handler(cfg):
    sys.path.insert(0, cfg.function_dir)
    if cfg.deps_dir:
        site = os.path.join(cfg.deps_dir, 'site-packages')
        if site not in sys.path:
            sys.path.insert(1, site)
    module = importlib.import_module(cfg.module_name)
    handler = getattr(module, cfg.handler_name, None)
    if not callable(handler):
        raise ConfigError('%s exports no function "%s"' % (getattr(module, '__file__', cfg.module_name), cfg.handler_name))
    return handler


def main():
    try:
        cfg = Config(os.environ)
    except ConfigError as err:
        sys.stderr.write('kfn: %s\n' % err)
        return 1
    _emit_settings['publisher'] = cfg.publisher
    _emit_settings['timeout'] = cfg.timeout
    try:
        handler = load_handler(cfg)
    except ConfigError as err:
        sys.stderr.write('kfn: load handler: %s\n' % err)
        return 1
    except Exception:
        import traceback
        sys.stderr.write('kfn: load handler %s from %s:\n%s' % (cfg.module_name, cfg.function_dir, traceback.format_exc()))
        return 1
    server = Server(cfg, handler)

    def on_signal(signum, frame):
        raise _Drain()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        lsock = listen(cfg)
    except OSError as err:
        sys.stderr.write('kfn: listen on port %s: %s\n' % (cfg.port, err))
        return 1
    threading.Thread(target=server.watchdog.run, name='kfn-watchdog', daemon=True).start()
    print('kfn: function %s ready on port %d' % (cfg.function_name or '(unnamed)', lsock.getsockname()[1]), flush=True)
    if cfg.trace_endpoint:
        def start_tracing():
            problem = server.tracing.start(cfg)
            if problem:
                sys.stderr.write('kfn: %s\n' % problem)
        threading.Thread(target=start_tracing, name='kfn-tracing', daemon=True).start()
    serve = server.serve_connection
    Thread = threading.Thread
    try:
        while True:
            try:
                sock, addr = lsock.accept()
            except OSError as err:
                sys.stderr.write('kfn: accept: %s\n' % err)
                time.sleep(0.01)
                continue
            Thread(target=serve, args=(sock, addr), daemon=True).start()
    except _Drain:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lsock.close()
    ok = server.drain()
    server.tracing.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if ok else 1

"""The event handed to main(event, context), and emitCloudEvent."""

import json
import time
from urllib.parse import unquote_to_bytes

from .bottleapi import Request as BottleRequest
from .httpio import HTTPError, media_type

# Headers that carry trace context; copied from the incoming request to an
# emitted event when no OpenTelemetry SDK produces a child context.
TRACE_HEADERS = (
    'traceparent', 'tracestate', 'baggage', 'x-request-id', 'b3',
    'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags',
)


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
_emit_settings = {'publisher': '', 'timeout': 30.0, 'token': '', 'identity': ''}


def configure_emit(publisher, timeout, token='', identity_file=''):
    """Set where emitCloudEvent publishes, how long it waits, and the tokens
    it sends: the pod's identity token, read from identity_file
    (KFN_IDENTITY_TOKEN_FILE) at every emit since the kubelet renews it, as
    its bearer token, and the publisher's shared one (PUBLISHER_TOKEN)
    beside it in Kfn-Publisher-Token, or as the bearer token without an
    identity."""
    _emit_settings['publisher'] = publisher
    _emit_settings['timeout'] = timeout
    _emit_settings['token'] = token
    _emit_settings['identity'] = identity_file


def _identity_token():
    path = _emit_settings['identity']
    if not path:
        return ''
    try:
        with open(path, encoding='utf-8') as f:
            return f.read().strip()
    except OSError:
        return ''


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
    attributes of a CloudEvent and 'extensions': the request with bottle's
    API (bottleapi.Request over the host's request.Request) and the
    response."""

    def __init__(self, request, response, tracer, scope):
        dict.__init__(self)
        self['extensions'] = {'request': BottleRequest(request), 'response': response}
        self.tracer = tracer
        self._scope = scope
        self._headers = request.headers

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
        return emit(self._scope, self._headers, type, source, data, optionalCloudEventAttributes)

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


# The largest hop count read from an incoming event: a longer count is
# taken as this, far over the event bridge's hop limit.
_MAX_HOPS = 999999999


def _hops_of(incoming):
    """The hop count (ce-kfnhops) of the event a call handles: 0 for a call
    that is no event or whose count is no number."""
    v = incoming.get('ce-kfnhops') if incoming is not None else None
    if not v or not v.isascii() or not v.isdigit():
        return 0
    return _MAX_HOPS if len(v) > 9 else int(v)


def emit(scope, incoming, type, source, data, attributes=None):
    """POST a binary-mode CloudEvent to PUBLISHER_PROXY_ADDRESS with the trace
    context of the call it is emitted in: scope's (the call's span), else
    the trace headers of incoming (the request's headers, or None), one hop
    further (kfnhops) than the event the call handles. Returns
    the publisher's response on 2xx; raises ValueError for an invalid type,
    source or attribute name and CloudEventError when it cannot publish."""
    publisher = _emit_settings['publisher']
    if not publisher:
        raise CloudEventError('emitCloudEvent: PUBLISHER_PROXY_ADDRESS is not set')
    if not isinstance(type, str) or not type:
        raise ValueError('emitCloudEvent: type must be a non-empty string')
    if not isinstance(source, str) or not source:
        raise ValueError('emitCloudEvent: source must be a non-empty string')
    headers = {'ce-specversion': '1.0', 'ce-type': type, 'ce-source': source}
    content_type = None
    for name, value in (attributes or {}).items():
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
    # One hop further than the event the call handles, whatever the handler
    # set: the event bridge refuses events past its hop limit, which ends a
    # function that emits the events it receives.
    headers['ce-kfnhops'] = str(_hops_of(incoming) + 1)
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
    if scope is not None:
        scope.inject(headers)
    elif incoming is not None:
        for h in TRACE_HEADERS:
            v = incoming.get(h)
            if v is not None:
                headers[h] = v
    # The pod's identity goes in Authorization; the publisher's shared
    # token beside it (Kfn-Publisher-Token), or alone in Authorization when
    # there is no identity: the publisher checks both.
    identity, shared = _identity_token(), _emit_settings['token']
    if identity:
        headers['Authorization'] = 'Bearer ' + identity
        if shared:
            headers['Kfn-Publisher-Token'] = shared
    elif shared:
        headers['Authorization'] = 'Bearer ' + shared
    return _post(publisher, headers, body)


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
        except (ValueError, RecursionError) as err:  # RecursionError: nested too deep
            raise HTTPError(400, 'malformed JSON in structured CloudEvent: %s' % err)
        if not isinstance(envelope, dict):
            raise HTTPError(400, 'a structured CloudEvent must be a JSON object')
        for k, v in envelope.items():
            if k not in ('data', 'data_base64'):
                event['ce-' + k] = v
        if 'data' not in envelope and 'data_base64' in envelope:
            import base64
            try:
                event['data'] = base64.b64decode(envelope['data_base64'])
            except (ValueError, TypeError) as err:  # binascii.Error is a ValueError
                raise HTTPError(400, 'malformed data_base64 in structured CloudEvent: %s' % err)
        else:
            event['data'] = envelope.get('data')
        return
    event['data'] = decode_data(mt, body)
    if 'ce-type' in headers and 'ce-source' in headers:
        for k, v in headers.items():
            if k.startswith('ce-') and len(k) > 3:
                event[k] = decode_attribute(v)
        if ct is not None:
            event['ce-datacontenttype'] = ct


def decode_attribute(value):
    """Undo the percent-encoding the CloudEvents HTTP binding asks of a
    sender in binary mode (kfn's dispatcher writes space, ", % and
    non-ASCII as %XY): one round of decoding, so the handler reads the
    attribute as it was published. A value that is not valid
    percent-encoded UTF-8 ("100%", written raw by a sender that does not
    encode) is kept as it came."""
    if '%' not in value:
        return value
    try:
        return unquote_to_bytes(value).decode('utf-8')
    except UnicodeDecodeError:
        return value


def decode_data(mt, body):
    """event['data'] of a body of media type mt: JSON parsed, text, the
    values of a urlencoded form (a dict, the last value of each name,
    UTF-8), bytes otherwise, None without a body; HTTPError(400) for
    malformed JSON."""
    if body is None:
        return None
    if mt == 'application/json' or mt.endswith('+json'):
        if not body:
            return None
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as err:  # RecursionError: nested too deep
            raise HTTPError(400, 'malformed JSON in request body: %s' % err)
    if mt.startswith('text/'):
        return body.decode('utf-8', 'replace')
    if mt == 'application/x-www-form-urlencoded':
        from urllib.parse import parse_qsl
        return dict(parse_qsl(body.decode('utf-8', 'replace'), keep_blank_values=True))
    return body

"""The request python312 handlers get as event['extensions']['request'].

Kyma's python312 runtime hands handlers a bottle request (bottle 0.13, on
cheroot's WSGI server), and handlers use it as bottle documents it. This
module gives the same API with the standard library only: a request that
wraps a WSGI environ built the way cheroot builds it, with bottle's
properties, caches and dict-like access, and bottle's MultiDict, FormsDict,
HeaderDict, WSGIHeaderDict and FileUpload. What each returns follows
bottle's behaviour, quirks included (item access of a FormsDict gives the
latin-1 text of the percent-decoded bytes, attribute access recodes it to
UTF-8), so a handler behaves here as in Kyma; runtimes/bottle_test.go
checks it against a real bottle."""

import io
import json
import os
import re
import socket
import sys
from collections.abc import MutableMapping
from urllib.parse import SplitResult, quote, unquote, unquote_to_bytes, urljoin

from .httpio import HTTPError

# The server name the environ gives (SERVER_NAME), looked up once.
_server_name = []


def _hostname():
    if not _server_name:
        try:
            _server_name.append(socket.gethostname())
        except OSError:
            _server_name.append('localhost')
    return _server_name[0]


def header_key(name):
    """A header name as bottle shows it: 'content_type' -> 'Content-Type'."""
    if '\n' in name or '\r' in name or '\0' in name:
        raise ValueError('header names must not contain control characters: %r' % name)
    return name.title().replace('_', '-')


def _header_value(value):
    text = value if isinstance(value, str) else str(value)
    if '\n' in text or '\r' in text or '\0' in text:
        raise ValueError('header values must not contain control characters: %r' % text)
    return text


def split_header(value):
    """A header such as Content-Type or Content-Disposition as a list of
    (value, {parameter: value}); parameter names lower-case, quoted values
    unquoted."""
    out = []
    if '"' not in value:
        for item in value.split(','):
            parts = item.split(';')
            params = {}
            for attr in parts[1:]:
                name, val = attr.split('=', 1)  # a parameter without '=' raises, as in bottle
                params[name.strip().lower()] = val.strip()
            out.append((parts[0].strip(), params))
        return out
    params, pending, sep = {}, None, ','
    for quoted, plain, token in _regex('tokens').findall(value):
        text = plain.strip() if plain else quoted.replace('\\"', '"')
        if sep == ',':
            params = {}
            out.append((text, params))
        elif sep == ';':
            if token == '=':
                pending = text
            else:
                params[text.strip().lower()] = ''
        elif sep == '=' and pending:
            params[pending.strip().lower()] = text
            pending = None
        sep = token
    return out


# Regular expressions, compiled on first use (a host starts faster
# without compiling them).
_PATTERNS = {
    # The parts of a header with quoted strings: a quoted or a plain
    # value, then the separator after it.
    'tokens': r'(?:(?:"((?:[^"\\]|\\.)*)")|([^;,=]+))([;,=]?)',
    # What may follow a file name's characters: removed, or made one '-'.
    'unsafe': r'[^a-zA-Z0-9-_.\s]',
    'dashes': r'[-\s]+',
}
_compiled = {}


def _regex(name):
    r = _compiled.get(name)
    if r is None:
        r = _compiled[name] = re.compile(_PATTERNS[name])
    return r


def parse_qsl(text):
    """Pairs of a query string or form body, each percent-decoded to latin-1
    text (the WSGI way: one character per byte), '+' as a space, blanks
    kept."""
    pairs = []
    for pair in text.split('&'):
        if not pair:
            continue
        key, _, value = pair.partition('=')
        pairs.append((unquote(key.replace('+', ' '), encoding='latin1'),
                      unquote(value.replace('+', ' '), encoding='latin1')))
    return pairs


class MultiDict(MutableMapping):
    """A dict that keeps every value given for a key and answers with the
    last one; getall() has them all. Setting a key appends a value."""

    def __init__(self, *args, **kwargs):
        self.dict = {k: [v] for k, v in dict(*args, **kwargs).items()}

    def __len__(self):
        return len(self.dict)

    def __iter__(self):
        return iter(self.dict)

    def __contains__(self, key):
        return key in self.dict

    def __delitem__(self, key):
        del self.dict[key]

    def __getitem__(self, key):
        return self.dict[key][-1]

    def __setitem__(self, key, value):
        self.append(key, value)

    def keys(self):
        return self.dict.keys()

    def values(self):
        return (vs[-1] for vs in self.dict.values())

    def items(self):
        return ((k, vs[-1]) for k, vs in self.dict.items())

    def allitems(self):
        return ((k, v) for k, vs in self.dict.items() for v in vs)

    iterkeys = keys
    itervalues = values
    iteritems = items
    iterallitems = allitems

    def get(self, key, default=None, index=-1, type=None):
        """The value of key at index (the last by default), converted by
        type when given; default when there is none or type fails."""
        try:
            value = self.dict[key][index]
            return type(value) if type else value
        except Exception:
            return default

    def append(self, key, value):
        """Add a value for key."""
        self.dict.setdefault(key, []).append(value)

    def replace(self, key, value):
        """Make value the only value of key."""
        self.dict[key] = [value]

    def getall(self, key):
        """Every value of key, possibly none."""
        return self.dict.get(key) or []

    getone = get
    getlist = getall


class FormsDict(MultiDict):
    """Query, form and cookie values. Item access gives the values as they
    are (latin-1 text of the bytes for query and urlencoded forms); attribute
    access and getunicode() recode them to input_encoding (UTF-8), and a
    missing attribute is ''."""

    input_encoding = 'utf8'
    recode_unicode = True

    def _recode(self, text, encoding=None):
        if isinstance(text, str) and self.recode_unicode:
            return text.encode('latin1').decode(encoding or self.input_encoding)
        if isinstance(text, bytes):
            return text.decode(encoding or self.input_encoding)
        return text

    def decode(self, encoding=None):
        """A copy with every key and value recoded to encoding (default
        input_encoding)."""
        copy = FormsDict()
        copy.input_encoding = encoding or self.input_encoding
        copy.recode_unicode = False
        for key, value in self.allitems():
            copy.append(self._recode(key, copy.input_encoding), self._recode(value, copy.input_encoding))
        return copy

    def getunicode(self, name, default=None, encoding=None):
        """The value of name recoded to encoding, or default when it is
        missing or cannot be recoded."""
        try:
            return self._recode(self[name], encoding)
        except (UnicodeError, KeyError):
            return default

    def __getattr__(self, name, default=''):
        if name.startswith('__') and name.endswith('__'):
            raise AttributeError(name)
        return self.getunicode(name, default=default)


class HeaderDict(MultiDict):
    """Headers of a multipart part: names case-insensitive, setting a name
    replaces its value."""

    def __init__(self, *args, **kwargs):
        self.dict = {}
        if args or kwargs:
            self.update(*args, **kwargs)

    def __contains__(self, key):
        return header_key(key) in self.dict

    def __delitem__(self, key):
        del self.dict[header_key(key)]

    def __getitem__(self, key):
        return self.dict[header_key(key)][-1]

    def __setitem__(self, key, value):
        self.dict[header_key(key)] = [_header_value(value)]

    def append(self, key, value):
        self.dict.setdefault(header_key(key), []).append(_header_value(value))

    def replace(self, key, value):
        self.dict[header_key(key)] = [_header_value(value)]

    def getall(self, key):
        return self.dict.get(header_key(key)) or []

    def get(self, key, default=None, index=-1):
        return MultiDict.get(self, header_key(key), default, index)

    def filter(self, names):
        """Remove the headers named."""
        for name in names:
            self.dict.pop(header_key(name), None)


class WSGIHeaderDict(MutableMapping):
    """The request's headers, read from the WSGI environ: names
    case-insensitive (shown as 'Content-Type'), values UTF-8 text,
    read-only."""

    cgikeys = ('CONTENT_TYPE', 'CONTENT_LENGTH')

    def __init__(self, environ):
        self.environ = environ

    def _ekey(self, key):
        key = key.replace('-', '_').upper()
        return key if key in self.cgikeys else 'HTTP_' + key

    def raw(self, key, default=None):
        """The header's value as the environ holds it (latin-1 text)."""
        return self.environ.get(self._ekey(key), default)

    def __getitem__(self, key):
        value = self.environ[self._ekey(key)]
        if isinstance(value, str):
            return value.encode('latin1').decode('utf8')
        return value.decode('utf8')

    def __setitem__(self, key, value):
        raise TypeError('%s is read-only.' % self.__class__)

    def __delitem__(self, key):
        raise TypeError('%s is read-only.' % self.__class__)

    def __iter__(self):
        for key in self.environ:
            if key[:5] == 'HTTP_':
                yield header_key(key[5:])
            elif key in self.cgikeys:
                yield header_key(key)

    def keys(self):
        return [key for key in self]

    def __len__(self):
        return len(self.keys())

    def __contains__(self, key):
        return self._ekey(key) in self.environ


class FileUpload:
    """One file of a multipart/form-data body."""

    def __init__(self, fileobj, name, filename, headers=None):
        self.file = fileobj
        self.name = name
        self.raw_filename = filename
        self.headers = HeaderDict(headers) if headers else HeaderDict()

    @property
    def content_type(self):
        """The part's Content-Type, '' when it has none."""
        return self.headers.get('Content-Type', '')

    @property
    def content_length(self):
        """The part's Content-Length header, -1 when it has none."""
        value = self.headers.get('Content-Length')
        return -1 if value is None else int(value)

    def get_header(self, name, default=None):
        """A header of the part, or default."""
        return self.headers.get(name, default)

    @property
    def filename(self):
        """The client's file name made safe for a file system: ASCII
        letters, digits, '-', '_' and '.', spaces as '-', at most 255
        characters, 'empty' when nothing is left."""
        cached = self.__dict__.get('_filename')
        if cached is not None:
            return cached
        import unicodedata
        name = self.raw_filename
        if not isinstance(name, str):
            name = name.decode('utf8', 'ignore')
        name = unicodedata.normalize('NFKD', name).encode('ASCII', 'ignore').decode('ASCII')
        name = os.path.basename(name.replace('\\', os.path.sep))
        name = _regex('unsafe').sub('', name).strip()
        name = _regex('dashes').sub('-', name).strip('.-')
        self.__dict__['_filename'] = name[:255] or 'empty'
        return self.__dict__['_filename']

    def _copy(self, out, chunk_size):
        offset = self.file.tell()
        while True:
            chunk = self.file.read(chunk_size)
            if not chunk:
                break
            out.write(chunk)
        self.file.seek(offset)

    def save(self, destination, overwrite=False, chunk_size=2 ** 16):
        """Write the file to destination: a path (a directory gets
        filename appended; an existing file is an IOError unless
        overwrite) or a file-like object."""
        if isinstance(destination, str):
            if os.path.isdir(destination):
                destination = os.path.join(destination, self.filename)
            if not overwrite and os.path.exists(destination):
                raise IOError('File exists.')
            with open(destination, 'wb') as out:
                self._copy(out, chunk_size)
        else:
            self._copy(destination, chunk_size)


class MultipartError(HTTPError):
    """A multipart/form-data body that cannot be read: 400."""

    def __init__(self, message):
        HTTPError.__init__(self, 400, 'MultipartError: ' + message)


def parse_multipart(body, boundary, charset):
    """The parts of a multipart body as (name, filename or None, headers,
    data); raises MultipartError for a malformed one. Lines end in CRLF; a
    part's data ends at the CRLF before the next boundary line."""
    separator = b'--' + boundary.encode('utf8')
    terminator = separator + b'--'
    lines = body.split(b'\r\n')
    # The last piece has no CRLF after it; an empty one is no line.
    ended = lines[-1] == b''
    if ended:
        lines.pop()
    i = 0
    while i < len(lines) and lines[i] not in (separator, terminator):
        i += 1
    if i == len(lines):
        raise MultipartError('Stream does not contain boundary')
    if lines[i] == terminator:
        if i + 1 < len(lines):
            raise MultipartError('Found data after empty multipart stream')
        return []
    parts = []
    i += 1
    while True:
        headers = []
        while True:
            if i >= len(lines):
                raise MultipartError('Unexpected end of multipart stream.')
            if i == len(lines) - 1 and not ended:
                raise MultipartError('Unexpected end of line in header.')
            line = lines[i].decode(charset)
            i += 1
            if not line.strip():
                break
            if line[0] in ' \t' and headers:
                name, value = headers.pop()
                headers.append((name, value + line.strip()))
                continue
            if ':' not in line:
                raise MultipartError('Syntax error in header: No colon.')
            name, value = line.split(':', 1)
            headers.append((name.strip(), value.strip()))
        start = i
        while i < len(lines) and lines[i] not in (separator, terminator):
            i += 1
        if i == len(lines):
            raise MultipartError('Unexpected end of multipart stream.')
        data = b'\r\n'.join(lines[start:i])
        hd = HeaderDict(headers)
        disposition = hd.get('Content-Disposition')
        if not disposition:
            raise MultipartError('Content-Disposition header is missing.')
        options = split_header(disposition)[0][1]
        filename = options.get('filename')
        if filename is not None and (filename[1:3] == ':\\' or filename[:2] == '\\\\'):
            filename = filename.split('\\')[-1]
        part_charset = charset
        ctype = hd.get('Content-Type')
        if ctype:
            part_charset = split_header(ctype)[0][1].get('charset') or charset
        content_length = int(hd.get('Content-Length', '-1'))
        if 0 < content_length < len(data):
            raise MultipartError('Size of body exceeds Content-Length header.')
        parts.append((options.get('name'), filename, headers, data, part_charset))
        if lines[i] == terminator:
            return parts
        i += 1


def _cached(key):
    """A read-only property computed once per request and kept in the
    environ under key (bottle's cache keys, which __setitem__ clears)."""
    def wrap(compute):
        def get(self):
            env = self.environ
            if key not in env:
                env[key] = compute(self)
            return env[key]
        get.__doc__ = compute.__doc__
        return property(get)
    return wrap


class Request:
    """The HTTP request, with the API of bottle's BaseRequest.

    It wraps a WSGI environ, built on first use from the request the host
    read (raw), or given. Set attributes are kept in the environ, as
    bottle keeps them."""

    __slots__ = ('_environ', '_raw')

    # The bound on bodies read for .json and .forms: FUNC_MEMFILE_MAX, set
    # by the host (bottle's MEMFILE_MAX, which Kyma's runtime sets to it).
    MEMFILE_MAX = 102400
    # The port the environ names (SERVER_PORT).
    server_port = '8080'

    def __init__(self, raw=None, environ=None):
        object.__setattr__(self, '_raw', raw)
        object.__setattr__(self, '_environ', environ)
        if environ is not None:
            environ['bottle.request'] = self

    @property
    def environ(self):
        """The WSGI environ of the request, as cheroot and bottle make it."""
        env = self._environ
        if env is None:
            env = make_environ(self._raw, self.server_port)
            env['bottle.request'] = self
            object.__setattr__(self, '_environ', env)
        return env

    @property
    def app(self):
        """bottle's application; kfn has none, so this raises RuntimeError
        as bottle does for a request not connected to one."""
        if 'bottle.app' in self.environ:
            return self.environ['bottle.app']
        raise RuntimeError('This request is not connected to an application.')

    @property
    def route(self):
        """bottle's Route; kfn has none (RuntimeError, as bottle)."""
        if 'bottle.route' in self.environ:
            return self.environ['bottle.route']
        raise RuntimeError('This request is not connected to a route.')

    @property
    def url_args(self):
        """The route's URL arguments: none, as for Kyma's catch-all route."""
        if 'route.url_args' in self.environ:
            return self.environ['route.url_args']
        raise RuntimeError('This request is not connected to a route.')

    @property
    def path(self):
        """PATH_INFO with exactly one leading slash."""
        return '/' + self.environ.get('PATH_INFO', '').lstrip('/')

    @property
    def method(self):
        """The request method, upper-case."""
        return self.environ.get('REQUEST_METHOD', 'GET').upper()

    @_cached('bottle.request.headers')
    def headers(self):
        """The request headers (WSGIHeaderDict)."""
        return WSGIHeaderDict(self.environ)

    def get_header(self, name, default=None):
        """A request header's value, or default."""
        return self.headers.get(name, default)

    @_cached('bottle.request.cookies')
    def cookies(self):
        """The cookies (FormsDict); signed cookies are not decoded."""
        from http.cookies import SimpleCookie
        jar = SimpleCookie(self.environ.get('HTTP_COOKIE', '')).values()
        return FormsDict((c.key, c.value) for c in jar)

    def get_cookie(self, key, default=None, secret=None, digestmod=None):
        """A cookie's value, or default. With secret, the value of a cookie
        signed with it (bottle's set_cookie(secret=...); digestmod default
        hashlib.sha256, as bottle's), else default."""
        value = self.cookies.get(key)
        if not secret:
            return value or default
        if value and value.startswith('!') and '?' in value:
            # Imported here: most calls never need them (a host starts
            # faster without).
            import base64
            import hashlib
            import hmac
            digestmod = digestmod or hashlib.sha256
            sig, msg = value[1:].split('?', 1)
            key_bytes = secret.encode('utf8') if isinstance(secret, str) else bytes(secret)
            expected = base64.b64encode(hmac.new(key_bytes, msg.encode('utf8'), digestmod=digestmod).digest())
            if hmac.compare_digest(sig.encode('utf8'), expected):
                import pickle
                stored = pickle.loads(base64.b64decode(msg))
                if stored and stored[0] == key:
                    return stored[1]
        return default

    @_cached('bottle.request.query')
    def query(self):
        """The query string's values (FormsDict)."""
        values = self.environ['bottle.get'] = FormsDict()
        for key, value in parse_qsl(self.environ.get('QUERY_STRING', '')):
            values[key] = value
        return values

    GET = query

    @_cached('bottle.request.forms')
    def forms(self):
        """The form values of a urlencoded or multipart body, files
        excepted (FormsDict)."""
        forms = FormsDict()
        forms.recode_unicode = self.POST.recode_unicode
        for name, item in self.POST.allitems():
            if not isinstance(item, FileUpload):
                forms[name] = item
        return forms

    @_cached('bottle.request.params')
    def params(self):
        """query and forms together (FormsDict)."""
        params = FormsDict()
        for key, value in self.query.allitems():
            params[key] = value
        for key, value in self.forms.allitems():
            params[key] = value
        return params

    @_cached('bottle.request.files')
    def files(self):
        """The files of a multipart body (FormsDict of FileUpload)."""
        files = FormsDict()
        files.recode_unicode = self.POST.recode_unicode
        for name, item in self.POST.allitems():
            if isinstance(item, FileUpload):
                files[name] = item
        return files

    @_cached('bottle.request.json')
    def json(self):
        """The body parsed as JSON when the Content-Type is application/json
        or application/json-rpc, else None (also for an empty body); invalid
        JSON raises a 400 HTTPError."""
        ctype = self.environ.get('CONTENT_TYPE', '').lower().split(';')[0]
        if ctype not in ('application/json', 'application/json-rpc'):
            return None
        data = self._body_bytes(self.MEMFILE_MAX)
        if not data:
            return None
        try:
            return json.loads(data.decode('utf8'))
        except (ValueError, TypeError):
            raise HTTPError(400, 'Invalid JSON') from None

    @_cached('bottle.request.body')
    def _body(self):
        stream = self.environ.get('wsgi.input')
        if stream is None:
            stream = self.environ['wsgi.input'] = io.BytesIO()
            return stream
        data = stream.read(max(0, self.content_length)) if not self.chunked else stream.read()
        body = self.environ['wsgi.input'] = io.BytesIO(data)
        return body

    def _body_bytes(self, limit):
        if self.content_length > limit:
            raise HTTPError(413, 'Request entity too large')
        data = self.body.read(limit + 1)
        if len(data) > limit:
            raise HTTPError(413, 'Request entity too large')
        return data

    @property
    def body(self):
        """The body as a seekable file-like object, at its start."""
        body = self._body
        body.seek(0)
        return body

    @property
    def chunked(self):
        """Whether the body came with chunked transfer encoding."""
        return 'chunked' in self.environ.get('HTTP_TRANSFER_ENCODING', '').lower()

    @_cached('bottle.request.post')
    def POST(self):
        """forms and files together (FormsDict)."""
        post = FormsDict()
        ctype, options = split_header(self.environ.get('CONTENT_TYPE', ''))[0]
        if not ctype.startswith('multipart/'):
            text = self._body_bytes(self.MEMFILE_MAX).decode('latin1')
            for key, value in parse_qsl(text):
                post[key] = value
            return post
        post.recode_unicode = False
        charset = options.get('charset', 'utf8')
        boundary = options.get('boundary')
        if not boundary:
            raise MultipartError('Invalid content type header, missing boundary')
        for name, filename, headers, data, part_charset in parse_multipart(self.body.read(), boundary, charset):
            if not filename:
                post[name] = data.decode(part_charset)
            else:
                post[name] = FileUpload(io.BytesIO(data), name, filename, headers)
        return post

    @property
    def url(self):
        """The full URL: scheme, host (X-Forwarded-Host or Host), path and
        query."""
        return self.urlparts.geturl()

    @_cached('bottle.request.urlparts')
    def urlparts(self):
        """url as a SplitResult (scheme, netloc, path, query, '')."""
        env = self.environ
        scheme = env.get('HTTP_X_FORWARDED_PROTO') or env.get('wsgi.url_scheme', 'http')
        host = env.get('HTTP_X_FORWARDED_HOST') or env.get('HTTP_HOST')
        if not host:
            host = env.get('SERVER_NAME', '127.0.0.1')
            port = env.get('SERVER_PORT')
            if port and port != ('80' if scheme == 'http' else '443'):
                host += ':' + port
        return SplitResult(scheme, host, quote(self.fullpath), env.get('QUERY_STRING'), '')

    @property
    def fullpath(self):
        """The path with script_name before it."""
        return urljoin(self.script_name, self.path.lstrip('/'))

    @property
    def query_string(self):
        """The raw query string."""
        return self.environ.get('QUERY_STRING', '')

    @property
    def script_name(self):
        """SCRIPT_NAME with a leading and a trailing slash ('/' when
        empty)."""
        name = self.environ.get('SCRIPT_NAME', '').strip('/')
        return '/' + name + '/' if name else '/'

    def path_shift(self, shift=1):
        """Move shift path segments from path to script_name (back when
        negative); AssertionError when there are not that many."""
        if shift == 0:
            return
        path_info = self.path
        segments = path_info.strip('/').split('/')
        script = self.environ.get('SCRIPT_NAME', '/').strip('/').split('/')
        if segments[0] == '':
            segments = []
        if script[0] == '':
            script = []
        if 0 < shift <= len(segments):
            script, segments = script + segments[:shift], segments[shift:]
        elif 0 > shift >= -len(script):
            script, segments = script[:shift], script[shift:] + segments
        else:
            raise AssertionError('Cannot shift. Nothing left from %s' % ('SCRIPT_NAME' if shift < 0 else 'PATH_INFO'))
        new_path = '/' + '/'.join(segments)
        if path_info.endswith('/') and segments:
            new_path += '/'
        self['SCRIPT_NAME'] = '/' + '/'.join(script)
        self['PATH_INFO'] = new_path

    @property
    def content_length(self):
        """The Content-Length header as an int, -1 without one."""
        return int(self.environ.get('CONTENT_LENGTH') or -1)

    @property
    def content_type(self):
        """The Content-Type header, lower-case ('' without one)."""
        return self.environ.get('CONTENT_TYPE', '').lower()

    @property
    def is_xhr(self):
        """Whether X-Requested-With is XMLHttpRequest."""
        return self.environ.get('HTTP_X_REQUESTED_WITH', '').lower() == 'xmlhttprequest'

    @property
    def is_ajax(self):
        """is_xhr."""
        return self.is_xhr

    @property
    def auth(self):
        """Basic authentication as (user, password); (REMOTE_USER, None)
        when a front server authenticated; else None."""
        header = self.environ.get('HTTP_AUTHORIZATION', '')
        try:
            scheme, data = header.split(None, 1)
            if scheme.lower() == 'basic':
                import base64
                user, password = base64.b64decode(data.encode('utf8')).decode('utf8').split(':', 1)
                return user, password
        except (KeyError, ValueError):
            pass
        user = self.environ.get('REMOTE_USER')
        return (user, None) if user else None

    @property
    def remote_route(self):
        """The client and the proxies between, from X-Forwarded-For, else
        [REMOTE_ADDR]."""
        proxies = self.environ.get('HTTP_X_FORWARDED_FOR')
        if proxies:
            return [ip.strip() for ip in proxies.split(',')]
        remote = self.environ.get('REMOTE_ADDR')
        return [remote] if remote else []

    @property
    def remote_addr(self):
        """The client's address: the first of remote_route, or None."""
        route = self.remote_route
        return route[0] if route else None

    def copy(self):
        """A request over a shallow copy of the environ."""
        return Request(environ=self.environ.copy())

    def get(self, value, default=None):
        """An environ value, or default."""
        return self.environ.get(value, default)

    def __getitem__(self, key):
        return self.environ[key]

    def __delitem__(self, key):
        self[key] = ''
        del self.environ[key]

    def __iter__(self):
        return iter(self.environ)

    def __len__(self):
        return len(self.environ)

    def keys(self):
        """The environ's keys."""
        return self.environ.keys()

    def __setitem__(self, key, value):
        env = self.environ
        if env.get('bottle.request.readonly'):
            raise KeyError('The environ dictionary is read-only.')
        env[key] = value
        if key == 'wsgi.input':
            stale = ('body', 'forms', 'files', 'params', 'post', 'json')
        elif key == 'QUERY_STRING':
            stale = ('query', 'params')
        elif key.startswith('HTTP_'):
            stale = ('headers', 'cookies')
        else:
            stale = ()
        for name in stale:
            env.pop('bottle.request.' + name, None)

    def __repr__(self):
        return '<%s: %s %s>' % (self.__class__.__name__, self.method, self.url)

    def __getattr__(self, name):
        try:
            value = self.environ['bottle.request.ext.%s' % name]
        except KeyError:
            raise AttributeError('Attribute %r not defined.' % name) from None
        return value.__get__(self) if hasattr(value, '__get__') else value

    def __setattr__(self, name, value):
        if name == 'environ':
            object.__setattr__(self, '_environ', value)
            return
        if hasattr(self, name):
            raise AttributeError('Attribute already defined: %s' % name)
        self.environ['bottle.request.ext.%s' % name] = value

    def __delattr__(self, name):
        try:
            del self.environ['bottle.request.ext.%s' % name]
        except KeyError:
            raise AttributeError('Attribute not defined: %s' % name) from None


def path_info(raw_path):
    """PATH_INFO of a request path as cheroot gives it (percent-decoded
    except %2F, one character per byte) and as bottle then has it: the
    bytes read as UTF-8, invalid sequences dropped. Returns (PATH_INFO,
    the raw one)."""
    data = raw_path.encode('latin1')
    if b'%' not in data:
        raw = data
    else:
        # %2F stays quoted, in either case, as cheroot leaves it.
        parts = data.replace(b'%2f', b'%2F').split(b'%2F')
        raw = b'%2F'.join(unquote_to_bytes(part) for part in parts)
    if not raw.startswith(b'/'):
        raw = b'/' + raw
    raw_text = raw.decode('latin1')
    return raw.decode('utf8', 'ignore'), raw_text


def make_environ(raw, port):
    """The WSGI environ of a request the host read (request.Request), with
    the keys cheroot sets, then the headers in the order they came, then
    Content-Type and Content-Length, as cheroot orders them; the body is
    already read (bottle's body cache is set)."""
    pinfo, raw_path = path_info(raw.path)
    body = raw._body or b''
    headers = raw.headers
    env = {
        'ACTUAL_SERVER_PROTOCOL': 'HTTP/1.1',
        'PATH_INFO': pinfo,
        'QUERY_STRING': raw.query_string,
        'REMOTE_ADDR': raw.remote_addr or '',
        'REMOTE_PORT': str(raw.remote_port or ''),
        'REQUEST_METHOD': raw.method,
        'REQUEST_URI': raw.target,
        'SCRIPT_NAME': '',
        'SERVER_NAME': _hostname(),
        'SERVER_PROTOCOL': raw.version,
        'SERVER_SOFTWARE': 'kfn',
        'wsgi.errors': sys.stderr,
        'wsgi.input': io.BytesIO(body),
        'wsgi.input_terminated': 'transfer-encoding' in headers,
        'wsgi.multiprocess': False,
        'wsgi.multithread': True,
        'wsgi.run_once': False,
        'wsgi.url_scheme': 'http',
        'wsgi.version': (1, 0),
        'SERVER_PORT': port,
    }
    for name, value in headers.items():
        env['HTTP_' + name.upper().replace('-', '_')] = value
    ctype = env.pop('HTTP_CONTENT_TYPE', None)
    if ctype is not None:
        env['CONTENT_TYPE'] = ctype
    clen = env.pop('HTTP_CONTENT_LENGTH', None)
    if clen is not None:
        env['CONTENT_LENGTH'] = clen
    env['bottle.raw_path'] = raw_path
    env['route.url_args'] = {}
    env['bottle.request.body'] = io.BytesIO(body)
    return env

# Probes the request a python312 handler gets (event['extensions']['request'])
# with bottle's API: each probe is an expression on req, answered with its
# value made JSON (or the exception it raised). runtimes/bottle_test.go sends
# the same requests to kfn's host and to bottle itself (reference.py) and
# compares the answers probe by probe.
import io
from collections.abc import Mapping

PROBES = [
    # the request line and the URL
    "req.method", "req.path", "req.fullpath", "req.script_name", "req.query_string",
    "req.url", "req.urlparts", "req.urlparts.netloc", "req.urlparts.path",
    "req['REQUEST_METHOD']", "req.get('PATH_INFO')", "req.environ['QUERY_STRING']",
    "req.get('REQUEST_URI')", "req.get('SCRIPT_NAME')", "req.get('wsgi.url_scheme')",
    "req.get('missing', 'dflt')", "'HTTP_HOST' in req.keys()", "req.url_args",
    "req.copy().path", "req.chunked",
    "(lambda c: (c.path_shift(1), c.script_name, c.path, c.fullpath, c.get('SCRIPT_NAME')))(req.copy())",
    "(lambda c: (c.path_shift(-1), c.path))(req.copy())",
    # headers
    "req.headers.get('Content-Type')", "req.headers.get('content-type')", "req.headers['X-Test']",
    "req.headers.get('x_test')", "req.headers.get('missing')", "req.headers.get('X-Unicode')",
    "req.headers.raw('X-Unicode')", "list(req.headers)", "list(req.headers.keys())", "len(req.headers)",
    "'X-Test' in req.headers", "'x-test' in req.headers", "dict(req.headers)", "sorted(vars(req.headers))",
    "req.get_header('X-Test')", "req.get_header('missing', 'dflt')", "req.get_header('missing')",
    "req['HTTP_X_TEST']", "req.get('CONTENT_LENGTH')", "req.get('CONTENT_TYPE')",
    "req.content_type", "req.content_length", "req.is_xhr", "req.is_ajax", "req.auth",
    "req.remote_route[1:]", "req.remote_addr if req.get('HTTP_X_FORWARDED_FOR') else 'peer'",
    # query
    "req.query.get('name')", "req.query.get(key='type')", "req.query['name']", "req.query.name",
    "req.query.getunicode('name')", "req.query.getunicode('name', encoding='latin1')",
    "req.query.getunicode('missing', default='d')", "req.query.getall('a')", "req.query.getall('missing')",
    "req.query.get('a', index=0)", "req.query.get('a', index=5, default='none')", "req.query.get('n', type=int)",
    "req.query.get('name', type=int)", "req.query.get('name', 'dflt', type=int)", "req.query.get('missing', 'dflt')",
    "req.query.missing", "req.query.empty", "req.query.flag", "req.query.decode()['name']", "req.query.decode().name",
    "req.query.decode('latin1')['name']", "list(req.query.allitems())", "list(req.query.items())",
    "list(req.query.keys())", "list(req.query.values())", "list(req.query.iterallitems())", "len(req.query)",
    "'name' in req.query", "dict(req.query)", "req.query.getone('a')", "req.query.getlist('a')", "req.query.dict",
    "req.GET.get('name')", "req.query['missing']", "req.query.get('euro')", "req.query.euro", "req.query.bad",
    "req.query.getunicode('bad')",
    # body
    "req.body.read()", "req.body.read(3)", "(req.body.read(), req.body.read())", "sorted(vars(req.body))",
    "req.json",
    # forms, files, params
    "list(req.forms.allitems())", "req.forms.get('text')", "req.forms.text", "req.forms.name", "req.forms['name']",
    "req.forms.getall('a')", "req.forms.getunicode('name')", "list(req.POST.allitems())", "req.POST.get('text')",
    "list(req.params.allitems())", "req.params.get('text')", "req.params.get('name')", "req.params.getall('a')",
    "sorted(req.files.keys())", "req.files.get('upload')", "req.files.upload", "req.files.get('upload').filename",
    "req.files.get('upload').raw_filename", "req.files.get('upload').name", "req.files.get('upload').content_type",
    "req.files.get('upload').content_length", "req.files.get('upload').get_header('Content-Type')",
    "req.files.get('upload').headers.get('content-disposition')", "req.files.get('upload').file.read()",
    "(lambda b: (req.files.get('upload').save(b), b.getvalue())[1])(io.BytesIO())",
    "req.files.get('second').filename", "req.forms.get('field')", "req.forms.field", "req.forms.getunicode('field')",
    "req.forms.get('latin')", "req.forms.get('blank')",
    # cookies and authentication
    "req.cookies.get('c')", "req.cookies.d", "dict(req.cookies)", "req.get_cookie('c')", "req.get_cookie('missing', 'd')",
    "req.get_cookie('c', 'd')", "req.get_cookie('empty', 'd')", "req.get_cookie('signed', secret='s3cret')",
    "req.get_cookie('signed', secret='wrong')", "req.get_cookie('signed')",
    # attributes of one's own (kept in the environ), and what may not be set
    "(setattr(req, 'mine', 5), req.mine, req.get('bottle.request.ext.mine'))", "(setattr(req, 'path', 'x'))",
    "req.nothing", "(delattr(req, 'mine'), hasattr(req, 'mine'))",
    "(lambda c: (c.__setitem__('QUERY_STRING', 'z=9'), c.query.get('z'), c.params.get('z')))(req.copy())",
]


def plain(value):
    """value as JSON-able data: mappings and sequences by their items,
    bytes as latin-1 text, files and uploads by their content."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {'bytes': bytes(value).decode('latin1')}
    if hasattr(value, 'raw_filename') and hasattr(value, 'file'):
        return {'upload': [value.name, value.raw_filename, value.filename, value.content_type]}
    if isinstance(value, Mapping):
        return {'map': [[plain(k), plain(value[k])] for k in value]}
    if hasattr(value, 'read'):
        return {'stream': type(value).__name__}
    if isinstance(value, (list, tuple, set, frozenset)) or hasattr(value, '__next__') or type(value).__name__.startswith('dict_'):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items)
        return [plain(v) for v in items]
    return {'other': type(value).__name__}


def raised(err):
    status = getattr(err, 'status_code', None)
    if status is not None and hasattr(err, 'body'):
        return {'raises': 'HTTPError %d' % status}
    return {'raises': type(err).__name__}


def main(event, context):
    req = event['extensions']['request']
    out = {}
    for probe in PROBES:
        try:
            out[probe] = plain(eval(probe, {'req': req, 'io': io}))
        except Exception as err:
            out[probe] = raised(err)
    return out

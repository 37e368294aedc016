"""Turning a handler's return value into a response."""

import json

from .request import Response


def encode_result(value, response):
    """Turn a handler's return value into (status, headers, body) the way
    Kyma's bottle-based runtime does: None and every falsy value but a dict
    -> empty, a list of strings (or bytes) -> joined, dict (and other
    lists) -> JSON, str -> body, bottle-style HTTPResponse objects -> their
    status and body."""
    status = response.status
    headers = response.headers
    ctype = None
    if value is None or (not isinstance(value, dict) and _falsy(value)):
        # bottle's _cast: any falsy value (0, False, [], '') is an empty
        # body; a dict, even {}, went through its JSON plugin first.
        body = b''
    elif isinstance(value, (list, tuple)) and _all_text(value):
        # bottle joins a list of strings (or of bytes) into the body.
        body = b''.join(v.encode('utf-8') if isinstance(v, str) else bytes(v) for v in value)
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


def _falsy(value):
    """Whether value is falsy; a value whose truth cannot be told is not."""
    try:
        return not value
    except Exception:
        return False


def _all_text(values):
    """Whether values are all strings, or all bytes: what bottle joins."""
    return (all(isinstance(v, str) for v in values) or
            all(isinstance(v, (bytes, bytearray)) for v in values))

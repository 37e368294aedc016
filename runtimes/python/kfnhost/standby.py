"""Standby: a host started without a Function (KFN_STANDBY_TOKEN_SHA256 set)
waits, listening, until one caller holding the token loads a Function into it
with POST /_kfn/specialize; from then on it is that Function's host, for good.
See runtimes/README.md ("Standby hosts")."""

import hashlib
import hmac
import json
import os
import re

SPECIALIZE_PATH = '/_kfn/specialize'
# POST /_kfn/prepare fetches a Function's dependencies into the host's
# dependency directory before any Function is given to it, so that a
# specialize request with the same dependencies unpacks nothing.
PREPARE_PATH = '/_kfn/prepare'
# Largest prepare request body: an environment and a dependency set's name.
PREPARE_MAX_BYTES = 64 * 1024
# Largest specialize request body: a Function's source and dependency file,
# with room to spare.
MAX_BYTES = 4 * 1024 * 1024
MAX_FILES = 64
MAX_ENV = 512
FILE_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9._-]{0,254}\Z')
ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,254}\Z')
DEPS_HASH = re.compile(r'[0-9a-f]{64}\Z')
# Variables read once at start (the port is already open, the contract and
# directories are the image's), which a specialize request may not set.
FIXED = frozenset(['FUNC_PORT', 'KFN_HANDLER_API', 'KFN_LISTEN_FD', 'KFN_STANDBY_TOKEN_SHA256',
                   'KFN_FUNCTION_DIR', 'KFN_SOURCE_DIR', 'PYTHONPATH', 'PYTHONHOME'])


class SpecializeError(Exception):
    """A specialize request that is refused; status is the HTTP answer."""

    def __init__(self, status, message, spent=False):
        super().__init__(message)
        self.status = status
        # spent: the host took the Function's files and then failed: it
        # serves no Function at all from then on.
        self.spent = spent


def authorized(header, token_hash):
    """Whether an Authorization header carries the bearer token whose SHA-256
    (hex) is token_hash, compared in constant time."""
    if not header or not header.startswith('Bearer '):
        return False
    got = hashlib.sha256(header[7:].encode('latin-1')).hexdigest()
    return hmac.compare_digest(got, token_hash)


def _strings(obj, field, limit, check):
    if not isinstance(obj, dict):
        raise SpecializeError(400, 'specialize: %s must be an object of strings' % field)
    if len(obj) > limit:
        raise SpecializeError(400, 'specialize: %s has %d entries, at most %d' % (field, len(obj), limit))
    for k, v in obj.items():
        problem = check(k)
        if problem:
            raise SpecializeError(400, 'specialize: %s %s %s' % (field, json.dumps(k[:64]), problem))
        if not isinstance(v, str):
            raise SpecializeError(400, 'specialize: %s %s must be a string' % (field, json.dumps(k)))
        if field == 'env' and '\0' in v:
            raise SpecializeError(400, 'specialize: env %s holds a NUL character' % json.dumps(k))
    return obj


def _env_problem(name):
    if not ENV_NAME.match(name):
        return 'is not a variable name'
    if name in FIXED:
        return 'is fixed when the host starts'
    return ''


def _dependencies(d):
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SpecializeError(400, 'specialize: dependencies must be an object {runtime, hash}')
    for k in d:
        if k not in ('runtime', 'hash'):
            raise SpecializeError(400, 'specialize: dependencies: unknown field %s (want runtime, hash)' % json.dumps(k))
    if not isinstance(d.get('runtime'), str) or not d['runtime']:
        raise SpecializeError(400, 'specialize: dependencies.runtime must be a runtime name')
    if not isinstance(d.get('hash'), str) or not DEPS_HASH.match(d['hash']):
        raise SpecializeError(400, 'specialize: dependencies.hash must be 64 lower-case hex digits')
    return {'runtime': d['runtime'], 'hash': d['hash']}


def _object(body, fields):
    """Decode a request body that must be a JSON object of the given fields
    (SpecializeError(400) otherwise)."""
    try:
        spec = json.loads(body.decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as err:
        raise SpecializeError(400, 'specialize: body is not JSON: %s' % err) from None
    if not isinstance(spec, dict):
        raise SpecializeError(400, 'specialize: body must be a JSON object')
    for k in spec:
        if k not in fields:
            raise SpecializeError(400, 'specialize: unknown field %s (want %s)' % (json.dumps(k), ', '.join(fields)))
    return spec


def parse(body):
    """Read a specialize request body: {"env": {NAME: value}, "files": {name:
    content}, "dependencies": {"runtime": name, "hash": hex}}, all strings,
    dependencies optional; raise SpecializeError(400) saying what is wrong.
    Returns (env, files, dependencies or None)."""
    spec = _object(body, ('env', 'files', 'dependencies'))
    env = _strings(spec.get('env') or {}, 'env', MAX_ENV, _env_problem)
    files = _strings(spec.get('files'), 'files', MAX_FILES,
                     lambda name: '' if FILE_NAME.match(name) else 'is not a plain file name')
    if not files:
        raise SpecializeError(400, 'specialize: files is empty: a Function needs its source')
    return env, files, _dependencies(spec.get('dependencies'))


def parse_preparation(body):
    """Read a prepare request body: {"env": {NAME: value}, "dependencies":
    {"runtime": name, "hash": hex}}, dependencies required, no files; raise
    SpecializeError(400) saying what is wrong. Returns (env, dependencies)."""
    try:
        spec = _object(body, ('env', 'dependencies'))
        env = _strings(spec.get('env') or {}, 'env', MAX_ENV, _env_problem)
        deps = _dependencies(spec.get('dependencies'))
        if deps is None:
            raise SpecializeError(400, 'specialize: dependencies are required')
        return env, deps
    except SpecializeError as err:
        raise SpecializeError(400, 'prepare:' + str(err).removeprefix('specialize:')) from None


def write_files(directory, files):
    """Write the Function's files into directory (the function's writable
    directory), each owner-writable."""
    for name, content in files.items():
        path = os.path.join(directory, name)
        if os.path.lexists(path):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(content)

"""The dependency cache client (runtimes/README.md, "Dependency cache"): a
Function's installed dependency directory travels as a gzip-compressed tar
to and from <KFN_DEPENDENCY_CACHE>/<runtime>/<hash>, with the pod's identity
token as the bearer token, and, to store, the install step's writer token
(KFN_DEPENDENCY_WRITER_TOKEN_FILE) in Kfn-Dependency-Writer. The install init
container runs this file as a program (the standard library only, no import of the host):

  python3 depcache.py fetch --runtime=python312 --hash=<hex> --dir=/usr/src/app/deps
    exit 0: the dependencies came from the cache and are in --dir;
    exit 1: they did not (not there, no cache, an error), --dir is empty
    (it is emptied first).
  python3 depcache.py store --runtime=python312 --hash=<hex> --dir=/usr/src/app/deps
    uploads --dir; exit 0: the cache holds the set (stored, or there
    already); exit 1: it does not (the failed upload is logged). The
    install script never fails the pod for it.

A standby host given a Function with dependencies calls fetch() itself.
Unpacking refuses what would reach outside the directory: absolute names,
"..", entries below a symbolic link, links whose target is absolute or
leads out of the directory (followed through the others, dangling or not),
and anything but regular files, directories and symbolic links; and what
passes its bounds (unpacked bytes, entries, extended header size, name
length: MAX_* below)."""

import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib

# Bounds of one exchange with the cache: the install container falls back
# to installing, a standby host fails its specialize request.
FETCH_TIMEOUT = 60.0
STORE_TIMEOUT = 120.0
# How many times the program asks the cache when its answer may pass: a
# fetch that gives up installs (npm or pip), a store that gives up leaves
# the next pod to install again.
FETCH_ATTEMPTS = 3
STORE_ATTEMPTS = 5
MAX_RETRY_WAIT = 10.0
TRANSIENT_STATUSES = (429, 502, 503, 504)
# The header of the install step's writer token (KFN_DEPENDENCY_WRITER_TOKEN_FILE),
# which a store sends beside the identity token: the cache stores nothing
# without it.
WRITER_HEADER = 'Kfn-Dependency-Writer'
HASH = re.compile(r'[0-9a-f]{64}\Z')
# Bounds of what a fetch unpacks (what the cache serves is as untrusted as
# what a tenant stored): the bytes the gzip stream expands to (the install
# container's KFN_DEPENDENCY_MAX_BYTES, the dependencies volume's size; a
# gzip bomb expands a thousand times), entries, one extended header (pax,
# GNU long name; names and link targets are at most MAX_PATH_BYTES), such
# headers in a row, a name's and a name part's length (Linux's PATH_MAX and
# NAME_MAX), and links followed in a row (Linux's).
MAX_UNPACKED_BYTES = 1 << 30
MAX_ENTRIES = 200000
MAX_HEADER_BYTES = 16 << 10
MAX_CHAINED_HEADERS = 8
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_LINK_HOPS = 40
RUNTIME = re.compile(r'[a-z][a-z0-9]{0,31}\Z')


class UnsafeEntry(Exception):
    """An archive entry that would reach outside the directory, or that is
    not a file, directory or symbolic link."""


class CacheError(Exception):
    """The cache answered something other than the dependencies or 404, or
    could not be reached. transient: asking again may succeed (no answer,
    or 429, 502, 503, 504); retry_after: the cache's Retry-After, seconds
    (0: none)."""

    def __init__(self, message, transient=False, retry_after=0.0):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


def _http_error(method, url, err):
    try:
        retry_after = float(err.headers.get('Retry-After') or 0)
    except (TypeError, ValueError):
        retry_after = 0.0
    if not 0 < retry_after < float('inf'):  # NaN, negative, infinite: none
        retry_after = 0.0
    return CacheError('%s %s: %s %s' % (method, url, err.code, err.read(512).decode('utf-8', 'replace').strip()),
                      transient=err.code in TRANSIENT_STATUSES, retry_after=retry_after)


def _no_answer(method, url, err):
    # No connection (refused, reset, no route) may pass; a request that
    # outlasted its bound is not asked again.
    reason = getattr(err, 'reason', err)
    return CacheError('%s %s: %s' % (method, url, err), transient=not isinstance(reason, TimeoutError))


def object_url(base, runtime, digest):
    """The address of a dependency set in the cache."""
    if not RUNTIME.match(runtime or ''):
        raise ValueError('invalid runtime name %r' % runtime)
    if not HASH.match(digest or ''):
        raise ValueError('invalid dependency hash %r: want 64 lower-case hex digits' % digest)
    return '%s/%s/%s' % (base.rstrip('/'), runtime, digest)


def _bearer(token_file):
    if not token_file:
        return ''
    try:
        with open(token_file, encoding='utf-8') as f:
            return f.read().strip()
    except OSError:
        return ''


def _request(method, url, token_file, data=None, length=None, writer_token_file=''):
    req = urllib.request.Request(url, method=method, data=data)
    token = _bearer(token_file)
    if token:
        req.add_header('Authorization', 'Bearer ' + token)
    writer = _bearer(writer_token_file)
    if writer:
        req.add_header(WRITER_HEADER, writer)
    if data is not None:
        req.add_header('Content-Type', 'application/gzip')
        req.add_header('Content-Length', str(length))
    return req


def _opener():
    # No proxy from the environment: the cache is in the cluster.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def empty_dir(directory):
    """Remove everything inside directory (a volume's root stays)."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def fetch(base, runtime, digest, directory, token_file='', timeout=FETCH_TIMEOUT):
    """GET the dependency set and unpack it into directory, which must be
    empty. True when the dependencies are in directory, False when the cache
    has none (404); CacheError or UnsafeEntry otherwise, and directory is
    then left empty."""
    url = object_url(base, runtime, digest)
    try:
        resp = _opener().open(_request('GET', url, token_file), timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return False
        raise _http_error('GET', url, err) from None
    except OSError as err:
        raise _no_answer('GET', url, err) from None
    except ValueError as err:
        raise CacheError('GET %s: %s' % (url, err)) from None
    deadline = time.monotonic() + timeout
    try:
        with resp:
            unpack(resp, directory, deadline)
    except (UnsafeEntry, CacheError, tarfile.TarError, OSError, EOFError) as err:
        empty_dir(directory)
        if isinstance(err, UnsafeEntry):
            raise UnsafeEntry('GET %s: unpack into %s: %s' % (url, directory, err)) from None
        raise CacheError('GET %s: unpack into %s: %s' % (url, directory, err)) from None
    return True


def _safe_name(name):
    if '\0' in name:
        raise UnsafeEntry('entry %r: NUL in its name' % name)
    if name.startswith('/'):
        raise UnsafeEntry('entry %r: an absolute name' % name)
    parts = [p for p in name.split('/') if p not in ('', '.')]
    if '..' in parts:
        raise UnsafeEntry('entry %r: ".." in its name' % name)
    return '/'.join(parts)


def _mkdir(root, path, rel):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o755)
        return
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeEntry('entry %s: below %s, which is not a directory' % (rel, os.path.relpath(path, root)))


def _parents(root, rel):
    path = root
    for part in rel.split('/')[:-1]:
        path = os.path.join(path, part)
        _mkdir(root, path, rel)


class _Gunzip:
    """A gzip stream's decompressed bytes, read by tarfile in 'r|' mode, and
    at most limit of them: past it, UnsafeEntry (a gzip bomb expands a
    thousand times). What it holds at once is bounded by the reads asked."""

    def __init__(self, fileobj, limit):
        self._src = fileobj
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b''
        self._limit = limit
        self.total = 0

    def read(self, size=-1):
        if size is None or size < 0:
            size = 1 << 20
        out = []
        want = size
        while want > 0:
            if self._pending:
                chunk = self._z.decompress(self._pending, want)
                self._pending = self._z.unconsumed_tail
            elif self._z.eof:
                break
            else:
                raw = self._src.read(1 << 16)
                if not raw:
                    if not self._z.eof:
                        raise EOFError('the gzip stream ends early')
                    break
                chunk = self._z.decompress(raw, want)
                self._pending = self._z.unconsumed_tail
            self.total += len(chunk)
            if self.total > self._limit:
                raise UnsafeEntry('the archive unpacks to more than %d bytes' % self._limit)
            out.append(chunk)
            want -= len(chunk)
            if not chunk and not self._pending and self._z.eof:
                break
        return b''.join(out)


_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


class _BoundedInfo(tarfile.TarInfo):
    """A tar header whose extended headers (pax, GNU long names) are
    refused past MAX_HEADER_BYTES, and at most MAX_CHAINED_HEADERS in a row,
    before tarfile reads or parses them: a 200 KB pax header of small
    records cost tarfile 560 MiB."""

    def _proc_member(self, tar):
        if self.type in _EXTENDED:
            if self.size > MAX_HEADER_BYTES:
                raise UnsafeEntry('an extended header of %d bytes (at most %d)' % (self.size, MAX_HEADER_BYTES))
            tar.kfn_chained = getattr(tar, 'kfn_chained', 0) + 1
            if tar.kfn_chained > MAX_CHAINED_HEADERS:
                raise UnsafeEntry('more than %d extended headers in a row' % MAX_CHAINED_HEADERS)
        elif self.type == tarfile.GNUTYPE_SPARSE:
            raise UnsafeEntry('entry %r: a sparse file' % self.name)
        else:
            tar.kfn_chained = 0
        return super()._proc_member(tar)


def _limit(name, default):
    try:
        value = int(os.environ.get(name, '') or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _check_length(what, rel, name):
    if len(name.encode('utf-8', 'surrogateescape')) > MAX_PATH_BYTES:
        raise UnsafeEntry('%s %s: longer than %d bytes' % (what, rel[:64] + '...', MAX_PATH_BYTES))
    for part in name.split('/'):
        if len(part.encode('utf-8', 'surrogateescape')) > MAX_NAME_BYTES:
            raise UnsafeEntry('%s %s: a name longer than %d bytes' % (what, rel[:64] + '...', MAX_NAME_BYTES))


def unpack(fileobj, directory, deadline=None):
    """Write a gzip-compressed tar stream's entries into directory as they
    arrive, refusing unsafe ones and what passes the bounds (UnsafeEntry):
    KFN_DEPENDENCY_MAX_BYTES unpacked (default MAX_UNPACKED_BYTES),
    MAX_ENTRIES entries, extended headers of MAX_HEADER_BYTES, names of
    MAX_PATH_BYTES. Symbolic links are checked once all is written: one
    that leads out of the directory, followed through the others, is
    refused, even when it leads nowhere."""
    root = os.path.abspath(directory)
    links = []
    entries = 0
    source = _Gunzip(fileobj, _limit('KFN_DEPENDENCY_MAX_BYTES', MAX_UNPACKED_BYTES))
    with tarfile.open(fileobj=source, mode='r|', tarinfo=_BoundedInfo) as tar:
        while True:
            member = tar.next()
            if member is None:
                break
            # tarfile keeps every member it read; these are written at once.
            tar.members.clear()
            entries += 1
            if entries > MAX_ENTRIES:
                raise UnsafeEntry('the archive has more than %d entries' % MAX_ENTRIES)
            if deadline is not None and time.monotonic() > deadline:
                raise CacheError('the download took too long')
            _check_length('entry', member.name, member.name)
            rel = _safe_name(member.name)
            full = os.path.join(root, rel) if rel else root
            if member.isreg():
                if not rel:
                    raise UnsafeEntry('a file entry with no name')
                _parents(root, rel)
                mode = 0o755 if member.mode & 0o111 else 0o644
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), mode)
                with os.fdopen(fd, 'wb') as out:
                    src = tar.extractfile(member)
                    shutil.copyfileobj(src, out, 1 << 20)
            elif member.isdir():
                if rel:
                    _parents(root, rel)
                    _mkdir(root, full, rel)
            elif member.issym():
                if not rel:
                    raise UnsafeEntry('a symbolic link with no name')
                target = member.linkname
                _check_length('symbolic link', rel, target)
                if not target or target.startswith('/'):
                    raise UnsafeEntry('symbolic link %s -> %s: an absolute target' % (rel, target))
                lexical = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
                if lexical == '..' or lexical.startswith('../'):
                    raise UnsafeEntry('symbolic link %s -> %s: leaves the directory' % (rel, target))
                _parents(root, rel)
                os.symlink(target, full)
                links.append(rel)
            else:
                raise UnsafeEntry('entry %r: only files, directories and symbolic links' % rel)
    for rel in links:
        if _leads_out(root, rel):
            raise UnsafeEntry('symbolic link %s: leads out of the directory' % rel)


def _leads_out(root, rel):
    """Whether the symbolic link rel under root, followed as the kernel
    would through the links under root, leads out of root. A name that does
    not exist is taken as it is written (a dangling link leads where its
    target would be made); at most MAX_LINK_HOPS links are followed."""
    parts = rel.split('/')
    done = parts[:-1]  # real directories: the link's parents were made so
    todo = [parts[-1]]
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ('', '.'):
            continue
        if part == '..':
            if not done:
                return True
            done.pop()
            continue
        path = os.path.join(root, *done, part)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            done.append(part)
            continue
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise UnsafeEntry('symbolic link %s: more than %d links in a row' % (rel, MAX_LINK_HOPS))
            target = os.readlink(path)
            if target.startswith('/'):
                return True
            todo = target.split('/') + todo
            continue
        done.append(part)
    return False


def pack(directory, fileobj):
    """Write directory's tree into fileobj as a gzip-compressed tar:
    directories, regular files and symbolic links, names relative, in a
    fixed order; anything else is left out."""
    def clean(info):
        info.uid = info.gid = 0
        info.uname = info.gname = ''
        info.mtime = 0
        return info
    with tarfile.open(fileobj=fileobj, mode='w:gz', format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(directory):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, directory)
            names = sorted(dirnames + filenames)
            for name in names:
                full = os.path.join(dirpath, name)
                rel = name if rel_dir == '.' else rel_dir + '/' + name
                if os.path.islink(full) or os.path.isfile(full) or os.path.isdir(full):
                    tar.add(full, arcname=rel, recursive=False, filter=clean)


def store(base, runtime, digest, directory, token_file='', timeout=STORE_TIMEOUT, writer_token_file=''):
    """Pack directory (into a temporary file) and PUT it with the writer
    token of writer_token_file; return the cache's answer status (201
    stored, 200 already there), CacheError otherwise."""
    url = object_url(base, runtime, digest)
    with tempfile.TemporaryFile() as tmp:
        pack(directory, tmp)
        length = tmp.tell()
        tmp.seek(0)
        try:
            with _opener().open(_request('PUT', url, token_file, tmp, length, writer_token_file), timeout=timeout) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            raise _http_error('PUT', url, err) from None
        except OSError as err:
            raise _no_answer('PUT', url, err) from None
        except ValueError as err:
            raise CacheError('PUT %s: %s' % (url, err)) from None


def _args(argv):
    out = {}
    for a in argv:
        m = re.match(r'--([a-z]+)=(.*)\Z', a)
        if not m:
            raise ValueError('unknown argument %r: want --runtime=, --hash=, --dir=' % a)
        out[m.group(1)] = m.group(2)
    for k in ('runtime', 'hash', 'dir'):
        if not out.get(k):
            raise ValueError('--%s is required' % k)
    return out


def _retry_delay():
    try:
        return max(0.0, float(os.environ.get('KFN_DEPENDENCY_CACHE_RETRY_MS', '1000')) / 1000)
    except ValueError:
        return 1.0


def _again(what, attempts, call):
    """call() up to attempts times while it raises a transient CacheError,
    logging each wait; the last error is raised."""
    delay = _retry_delay()
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except CacheError as err:
            if not err.transient or attempt == attempts:
                raise
            wait = min(err.retry_after or delay * 2 ** (attempt - 1), MAX_RETRY_WAIT)
            print('kfn: %s: %s; asking the cache again in %.1f s (%d of %d)' % (what, err, wait, attempt + 1, attempts), flush=True)
            time.sleep(wait)


def fetch_at_start(base, runtime, digest, directory, token_file=''):
    """Fetch a host's own dependency set into directory before its handler
    loads (KFN_DEPENDENCY_HASH), asking again as the program does while the
    cache's answer may pass: True when the set is there, False when the
    cache has none (404); an error when the cache could not be read."""
    empty_dir(directory)  # what a restarted container's last run left
    return _again('dependencies %s/%s' % (runtime, digest[:12]), FETCH_ATTEMPTS,
                  lambda: fetch(base, runtime, digest, directory, token_file))


def main(argv):
    if not argv or argv[0] not in ('fetch', 'store'):
        sys.stderr.write('kfn: depcache: usage: depcache.py fetch|store --runtime=<name> --hash=<hex> --dir=<dir>\n')
        return 2
    command = argv[0]
    try:
        opts = _args(argv[1:])
    except ValueError as err:
        sys.stderr.write('kfn: depcache: %s\n' % err)
        return 2
    base = os.environ.get('KFN_DEPENDENCY_CACHE', '')
    token_file = os.environ.get('KFN_IDENTITY_TOKEN_FILE', '')
    writer_token_file = os.environ.get('KFN_DEPENDENCY_WRITER_TOKEN_FILE', '')
    what = 'dependencies %s/%s' % (opts['runtime'], opts['hash'][:12])
    if command == 'fetch':
        if not base:
            print('kfn: no dependency cache: installing %s' % what, flush=True)
            return 1
        start = time.monotonic()
        try:
            # What an earlier run of the container left (it is restarted
            # after a failed install) goes: the cache's tree is unpacked alone.
            empty_dir(opts['dir'])
            if _again(what, FETCH_ATTEMPTS, lambda: fetch(base, opts['runtime'], opts['hash'], opts['dir'], token_file)):
                print('kfn: %s from the cache in %d ms: nothing to install' % (what, (time.monotonic() - start) * 1000), flush=True)
                return 0
            print('kfn: %s not in the cache: installing' % what, flush=True)
        except (CacheError, UnsafeEntry, ValueError, OSError) as err:
            print('kfn: %s: the cache could not be read (%s): installing' % (what, err), flush=True)
        return 1
    if not base:
        return 1
    try:
        status = _again(what, STORE_ATTEMPTS, lambda: store(base, opts['runtime'], opts['hash'], opts['dir'], token_file,
                                                            writer_token_file=writer_token_file))
        print('kfn: %s %s' % (what, 'stored in the cache' if status == 201 else 'were in the cache already'), flush=True)
        return 0
    except (CacheError, ValueError, OSError, tarfile.TarError) as err:
        print('kfn: %s not stored in the cache (%s); the next pod installs them again' % (what, err), flush=True)
        return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

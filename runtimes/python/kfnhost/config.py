"""The host's settings, read from the environment."""

import os
import re

# Module names the host itself uses; a function module may not have them.
HOST_MODULES = ('kfnhost', 'kfn_main')

# The handler contracts (KFN_HANDLER_API).
APIS = ('event', 'request')


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
        source = env.get('KFN_SOURCE_DIR', '')
        self.source_dir = os.path.abspath(source) if source else ''
        deps = env.get('KFN_DEPS_DIR', '')
        self.deps_dir = os.path.abspath(deps) if deps else ''
        self.timeout = _number(env, 'FUNC_TIMEOUT', 180.0, 0.001)
        # The handler contract: main(event, context), or python314's main()
        # with Flask's request and the sdk module.
        self.api = env.get('KFN_HANDLER_API') or 'event'
        if self.api not in APIS:
            raise ConfigError('invalid KFN_HANDLER_API=%r: want one of %s' % (self.api, ', '.join(APIS)))
        # Kyma's names of each contract: python314 renamed them.
        newer = self.api == 'request'
        self.module_var = 'HANDLER_MOD_NAME' if newer else 'MOD_NAME'
        self.module_name = env.get(self.module_var) or 'handler'
        self.handler_name = env.get('HANDLER_FUNC_NAME' if newer else 'FUNC_HANDLER') or 'main'
        # A log line per request (Apache's combined format) when set to
        # anything, as Kyma's runtimes read it.
        self.request_log = bool(env.get('SERVER_INTERNAL_LOGGER' if newer else 'KYMA_INTERNAL_LOGGER_ENABLED'))
        if self.api == 'request':
            # python314's variable and unit: MB (MiB, as Flask counts
            # them), default 100.
            self.body_limit_mb = _number(env, 'FUNC_BODY_MB_LIMIT', 100.0, 0.000001)
            self.body_limit = max(1, int(self.body_limit_mb * 1024 * 1024))
        else:
            # Kyma's python312 variable and unit: bytes, default 100 MiB
            # (bottle's MEMFILE_MAX). REQ_MB_LIMIT is the Node.js host's.
            self.body_limit = _number(env, 'FUNC_MEMFILE_MAX', 100 * 1024 * 1024, 1, integer=True)
            self.body_limit_mb = self.body_limit / (1024 * 1024)
        self.memory_limit = env.get('FUNC_MEMORY_LIMIT')
        self.publisher = env.get('PUBLISHER_PROXY_ADDRESS', '')
        self.publisher_token = env.get('PUBLISHER_TOKEN', '')
        self.identity_token_file = env.get('KFN_IDENTITY_TOKEN_FILE', '')
        self.dependency_cache = env.get('KFN_DEPENDENCY_CACHE', '')
        self.trace_endpoint = env.get('TRACE_COLLECTOR_ENDPOINT', '')
        # A host that fetches its dependency set from the cache when it
        # starts (the pod has no install container): its hash.
        self.dependency_hash = env.get('KFN_DEPENDENCY_HASH', '')
        if self.dependency_hash:
            if not re.match(r'[0-9a-f]{64}\Z', self.dependency_hash):
                raise ConfigError('invalid KFN_DEPENDENCY_HASH: want 64 lower-case hex digits')
            if not (self.dependency_cache and self.deps_dir and self.runtime):
                raise ConfigError('KFN_DEPENDENCY_HASH needs KFN_DEPENDENCY_CACHE, KFN_DEPS_DIR and FUNC_RUNTIME')
        # A standby host (standby.py) waits for a Function, loaded by a
        # caller holding the token whose SHA-256 this is.
        self.standby_token_hash = env.get('KFN_STANDBY_TOKEN_SHA256', '')
        if self.standby_token_hash and not re.match(r'[0-9a-f]{64}\Z', self.standby_token_hash):
            raise ConfigError('invalid KFN_STANDBY_TOKEN_SHA256: want the hex SHA-256 of the token (64 lower-case hex digits)')
        if self.module_name in HOST_MODULES:
            raise ConfigError('%s=%s is the name of a host module' % (self.module_var, self.module_name))

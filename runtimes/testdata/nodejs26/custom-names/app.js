// Loaded as HANDLER_MOD_NAME=app, HANDLER_FUNC_NAME=handle (Kyma's newer
// runtimes' names); answers with the host variables the handler sees.
const NAMES = ['HANDLER_MOD_NAME', 'HANDLER_FUNC_NAME', 'HANDLER_PATH', 'FUNC_BODY_MB_LIMIT', 'FUNC_PORT',
  'MOD_NAME', 'FUNC_HANDLER', 'REQ_MB_LIMIT', 'FUNC_MEMFILE_MAX'];

module.exports = {
  handle: function (req, res) {
    res.json(Object.fromEntries(NAMES.map((name) => [name, process.env[name] === undefined ? null : process.env[name]])));
  },
};

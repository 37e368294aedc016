// A Kyma handler whose dependency was not declared: loading it fails.
const moment = require('kfn-test-no-such-package');

module.exports = { main: () => moment().format() };

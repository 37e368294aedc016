// A hello world with one npm dependency, loaded when the function loads.
const isNumber = require('is-number');

module.exports = { main: () => (isNumber(42) ? 'hello world' : 'no') };

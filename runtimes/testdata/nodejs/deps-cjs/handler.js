// CommonJS handler using a dependency from the public npm registry: found
// through NODE_PATH.
const isNumber = require('is-number');

module.exports = {
  main: (event) => ({ style: 'cjs', isNumber: isNumber(event.extensions.request.query.n) }),
};

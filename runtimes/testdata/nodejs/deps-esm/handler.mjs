// ES module handler using dependencies from the public npm registry: a
// CommonJS package and an ES-module-only package. ES modules ignore
// NODE_PATH; the host's resolve hook finds them in KFN_DEPS_DIR.
import isNumber from 'is-number';
import isPlainObj from 'is-plain-obj';

export function main(event) {
  return { style: 'esm', isNumber: isNumber(event.extensions.request.query.n), plain: isPlainObj({}) };
}

// Module resolve hooks for Node.js versions without module.registerHooks
// (registered with module.register, they run on Node's loader thread): a bare
// import that cannot be resolved from the importing file is resolved again
// from the function's dependency directory, then from the directory of the
// libraries Kyma's images provide. See load.cjs.

let parents = [];

export function initialize(data) {
  parents = data.parents || [];
}

function isBare(specifier) {
  return !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !isBare(specifier) || parents.length === 0) throw err;
    for (let i = 0; ; i++) {
      try {
        return await nextResolve(specifier, { ...context, parentURL: parents[i] });
      } catch (again) {
        if (i === parents.length - 1 || again?.code !== 'ERR_MODULE_NOT_FOUND') throw again;
      }
    }
  }
}

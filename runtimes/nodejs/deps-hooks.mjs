// Module resolve hooks for Node.js versions without module.registerHooks
// (registered with module.register, they run on Node's loader thread): a bare
// import that cannot be resolved from the importing file is resolved again
// from the function's dependency directory, then from the directory of the
// libraries Kyma's images provide, then from the host's own modules (sdk,
// for nodejs26 handlers). See load.cjs.

let parents = [];
let modules = {};

export function initialize(data) {
  parents = data.parents || [];
  modules = data.modules || {};
}

function isBare(specifier) {
  return !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !isBare(specifier)) throw err;
    let last = err;
    for (const parentURL of parents) {
      try {
        return await nextResolve(specifier, { ...context, parentURL });
      } catch (again) {
        if (again?.code !== 'ERR_MODULE_NOT_FOUND') throw again;
        last = again;
      }
    }
    if (Object.hasOwn(modules, specifier)) return { url: modules[specifier], format: 'commonjs', shortCircuit: true };
    throw last;
  }
}

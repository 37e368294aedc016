// Module resolve hooks for Node.js versions without module.registerHooks
// (registered with module.register, they run on Node's loader thread): a bare
// import that cannot be resolved from the importing file is resolved again
// from the function's dependency directory. See load.cjs.

let parentURL;

export function initialize(data) {
  parentURL = data.parentURL;
}

function isBare(specifier) {
  return !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !isBare(specifier) || !parentURL) throw err;
    return nextResolve(specifier, { ...context, parentURL });
  }
}

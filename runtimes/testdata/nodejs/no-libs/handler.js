// A handler that names none of the libraries: the host loads none of them.
module.exports = {
  main: () => String(Object.keys(require.cache).filter((f) => f.includes('node_modules')).length),
};

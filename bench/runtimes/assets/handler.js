module.exports = { main: () => 'hello world' };

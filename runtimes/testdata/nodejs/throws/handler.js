// A Kyma handler whose module throws while it loads (a missing setting).
if (!process.env.API_KEY) throw new Error('API_KEY is not set');

module.exports = { main: () => 'ok' };

// Anchor: the plainest node:http hello world, measured beside the kfn host.
const http = require('node:http');

const server = http.createServer((req, res) => {
  res.setHeader('Content-Type', 'text/plain');
  res.end('hello world');
});
server.keepAliveTimeout = 120000;
server.listen(Number(process.env.PORT));
process.on('SIGTERM', () => process.exit(0));

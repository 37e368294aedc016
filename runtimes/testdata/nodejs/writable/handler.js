// A Kyma handler that writes files next to itself: through HANDLER_PATH,
// __dirname and a relative path (the working directory is the function's).
const fs = require('fs');
const path = require('path');

module.exports = {
  main: function (event, context) {
    const dir = path.dirname(process.env.HANDLER_PATH);
    fs.writeFileSync(path.join(dir, 'cache.json'), JSON.stringify(event.data));
    fs.writeFileSync('relative.txt', 'written');
    return {
      handlerPath: process.env.HANDLER_PATH,
      dir: __dirname,
      cwd: process.cwd(),
      cached: JSON.parse(fs.readFileSync(path.join(__dirname, 'cache.json'), 'utf8')),
      relative: fs.readFileSync(path.join(__dirname, 'relative.txt'), 'utf8'),
    };
  },
};

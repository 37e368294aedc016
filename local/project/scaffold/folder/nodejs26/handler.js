const { getCloudEvent, getFunctionName } = require('sdk');

module.exports = {
  // Called for each HTTP request and each event, with Express's request and
  // response; answer through res.
  main: function (req, res) {
    const event = getCloudEvent(req);
    const data = (event ? event.data : req.body) || {};
    console.log(`${getFunctionName()} got type=${event ? event.type : undefined} data=${JSON.stringify(data)}`);
    res.json({ message: `${process.env.GREETING || 'Hello'} ${data.name || 'world'}` });
  },
};

module.exports = {
  // Called for each HTTP request and each event; the return value is the response body.
  main: async function (event, context) {
    const data = event.data || {};
    console.log(`${context['function-name']} got type=${event['ce-type']} data=${JSON.stringify(data)}`);
    return { message: `${process.env.GREETING || 'Hello'} ${data.name || 'world'}` };
  },
};

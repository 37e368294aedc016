module.exports = {
  main: async function (event, context) {
    const message = `Hello World from ${context['function-name']} on ${context.runtime}!`;
    console.log(message);
    return message;
  },
};

const greeting = 'esm-default';

export default {
  main: async (event) => ({ style: greeting, data: event.data }),
};

// order.created.v1 -> order.fulfilled.v1
module.exports = {
  main: async function (event, context) {
    const order = event.data;
    console.log(`fulfilling order ${order.id} (${order.item})`);
    await event.emitCloudEvent('order.fulfilled.v1', 'shop',
      { id: order.id, item: order.item, fulfilledBy: context['function-name'] },
      { id: `fulfilled-${order.id}` });
    return '';
  },
};

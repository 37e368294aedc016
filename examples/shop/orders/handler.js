// POST {"id": "42", "item": "book"} -> publishes order.created.v1 and answers 202.
module.exports = {
  main: async function (event, context) {
    const req = event.extensions.request;
    const res = event.extensions.response;
    if (req.method !== 'POST') {
      return res.status(405).json({ error: 'POST an order: {"id": "42", "item": "book"}' });
    }
    const order = event.data || {};
    if (!order.id || !order.item) {
      return res.status(400).json({ error: 'an order needs an id and an item' });
    }
    // The event id comes from the order id, so a retried request publishes
    // the order once (the publisher de-duplicates on source + id).
    await event.emitCloudEvent('order.created.v1', 'shop', order, { id: `order-${order.id}` });
    res.status(202);
    return { accepted: order.id };
  },
};

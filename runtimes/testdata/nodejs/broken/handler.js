module.exports = { main: function (event) { return event.data ) } };

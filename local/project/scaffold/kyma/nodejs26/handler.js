module.exports = {
  main: function (req, res) {
    res.send('Hello World!');
  },
};

module.exports = {
  main: function (req, res) {
    res.send('Hello ' + process.env.PERSON_NAME);
  }
}

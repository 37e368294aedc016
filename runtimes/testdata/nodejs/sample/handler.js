module.exports = {
  main: function(event, context) {
    const name = process.env.PERSON_NAME;
    return 'Hello ' + name;
  }
}

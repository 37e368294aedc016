module.exports = { run: () => 'custom names' };

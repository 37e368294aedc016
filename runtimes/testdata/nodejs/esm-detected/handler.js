// ES module syntax in a .js file without "type": "module": Node.js detects it
// (Node >= 20.19 / 22.7).
export const main = (event, context) => ({ style: 'esm-detected', name: context['function-name'] });

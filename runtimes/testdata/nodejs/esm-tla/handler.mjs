// Top-level await in the handler module.
const greeting = await Promise.resolve('esm-tla');

export function main(event, context) {
  return { style: greeting, name: context['function-name'] };
}

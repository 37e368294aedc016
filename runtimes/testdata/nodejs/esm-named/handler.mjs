export function main(event, context) {
  return { style: 'esm-named', name: context['function-name'] };
}

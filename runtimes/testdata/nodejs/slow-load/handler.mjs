// A handler that takes 30 s to load (TestASignalWhileStartingEndsTheHost):
// the host is still starting when the test signals it.
console.log('kfn-test: loading');
await new Promise((resolve) => setTimeout(resolve, 30000));

export default { main: () => 'loaded' };

// ES module handler using a package from a private registry (the test's).
import greeting from 'kfn-greet';

export default {
  main: () => greeting.greet('node'),
};

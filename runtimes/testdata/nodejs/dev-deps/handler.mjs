// A handler that uses a package its package.json lists under
// devDependencies only, and reports NODE_ENV: Kyma's images install
// devDependencies (npm install without --production, NODE_ENV empty).
import greeting from 'kfn-greet';

export default {
  main: () => ({ greeting: greeting.greet('node'), nodeEnv: process.env.NODE_ENV }),
};

// The same libraries from an ES module handler.
import axios from 'axios';
import { CloudEvent } from 'cloudevents';

export function main() {
  return { axios: typeof axios.get, cloudevents: new CloudEvent({ type: 't.v1', source: 's' }).type };
}

// The ES module form of Kyma's migration guide for nodejs26.
import { getCloudEvent, getFunctionName } from 'sdk';

export function main(req, res) {
  const ce = getCloudEvent(req);
  if (ce) {
    res.send(ce.type);
    return;
  }
  res.send('not a cloud event from ' + getFunctionName());
}

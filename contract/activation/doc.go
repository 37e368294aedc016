// Package activation is the contract of the scaler's activations, carried
// from every scaler replica to every event bridge replica over core NATS:
// the subject ([DefaultSubject]) and the message ([Encode], [Decode]), one
// per Function that got work while it had none (its first event, or a
// request the gateway holds). The event bridge claims a standby pod for
// such a Function at once (package contract/claim), so that its first
// event is delivered without waiting for KEDA and the Deployment. Each
// bridge answers on [ClaimedSubject] once that claim has ended, in the
// same message, and the scalers tell KEDA of the activation then (or
// after their claim hold): KEDA's scale-up, and the work it starts in the
// API server, the controllers and the kubelet, comes after the first
// delivery instead of beside it.
//
// A message that does not decode changes nothing. Whoever may publish on
// the subject may have standby pods given to Functions at zero (each is
// retired again when its Deployment stays at zero), so the subject is as
// trusted as the NATS account both sides share: in the chart only the
// scaler's user may publish on it, and only the event bridge's subscribe;
// the other way round on ClaimedSubject, whose message can at most have
// KEDA told of an activation before the claim ended, as without a hold.
package activation

package activity

import "k8s.io/apimachinery/pkg/types"

// The claim hold (WithClaimHold): an activation is told to the watchers
// once the event bridge's claim of a standby pod for the Function ended,
// or the hold's bound passed (activateLocked starts it).

// What ends a held activation (the label of
// kfn_scaler_activation_holds_total).
const (
	releasedByClaim = "claim_ended"
	releasedByBound = "bound"
)

// release ends fn's held activation, if it still is held, and tells its
// watchers when fn is still active; by says what ended it.
func (s *Scaler) release(fn *function, by string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !fn.held {
		return
	}
	fn.held = false
	fn.holdTimer.Stop()
	fn.holdTimer = nil
	s.o.metrics.held(by)
	if fn.active {
		s.announceLocked(fn)
	}
}

// ClaimEnded says that the event bridge's claim of a standby pod for
// Function key, which its activation started, has ended (a pod serves
// it, or none was given; the message of package contract/activation on
// its ClaimedSubject): a held activation is told to the watchers now
// (WithClaimHold). Anything else changes nothing.
func (s *Scaler) ClaimEnded(key types.NamespacedName) {
	s.mu.Lock()
	fn, ok := s.functions[key]
	s.mu.Unlock()
	if ok {
		s.release(fn, releasedByClaim)
	}
}

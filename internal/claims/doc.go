// Package claims is the event bridge's client of the controller's claim
// port (package contract/claim): Client.Claim asks the controller's leader
// for a standby pod for a Function at zero and returns the pod and the
// address of its host once it serves the Function. The client tries each
// address of the controller's headless Service (only the leader listens),
// keeps the one that answered, sends a claim again to every address when
// the kept one gives no answer (a claim asked twice is given one pod), and
// bounds the answers it reads.
package claims

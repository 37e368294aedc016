// Package apirules keeps an event bridge's gateway serving the cluster's
// APIRules (Kyma's gateway.kyma-project.io/v2): every replica watches
// them, hands the whole set to its gateway on each change, and writes each
// APIRule's status (Kyma's state Ready, Warning or Error, a description,
// the time it was processed) when it differs from what the APIRule shows.
// A list that fails leaves the gateway serving what it served: a watcher's
// failure is never read as "every APIRule was deleted".
package apirules

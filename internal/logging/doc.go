// Package logging is the one log layout of kfn's programs: JSON lines from
// log/slog with the keys time, level, msg and component first, the error of
// a line under "error" (controller-runtime's "err" too), and the four
// standard levels only, so that every component's logs (controller, event
// bridge, scaler, kfn dev) read and filter alike.
package logging

// Package cli is the kfn command line: its commands, their flags and help,
// and the errors they print. cmd/kfn only wires it to the process.
package cli

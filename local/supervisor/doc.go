// Package supervisor runs the local processes of `kfn dev`'s functions:
// each process gets an inherited listening socket, is used only once its
// health check answers, is replaced by a new version without dropping
// requests (start, wait ready, switch, drain the old one), is restarted when
// it crashes, and never outlives kfn. Their output lines share one writer
// (a SyncWriter) without any process ever waiting for it, each function
// in turn, so that no function's output slows another's processes or
// delays its lines.
package supervisor

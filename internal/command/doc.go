// Package command is the main of every kfn component binary (event
// bridge, scaler, controller): parse the component's flags, make kfn's
// logger at the -log-level given, run until SIGINT or SIGTERM, and report
// a failure on stderr with exit status 1; a configuration may load more
// after the flags (the controller's config file) and choose the log
// format, and a binary may carry subcommands (the controller's
// fetch-source). Each cmd/* main is then its component's configuration
// and one call.
package command

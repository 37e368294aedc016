// Package deps installs a function's dependencies (package.json or
// requirements.txt) once per distinct dependency set, into a cache directory
// keyed by their hash, and hands out the installed directory to every later
// start that has the same dependencies.
//
// An installed directory is complete or absent: the installer writes into a
// temporary directory that is renamed into place when it succeeded, and a
// file lock per key makes concurrent callers (several kfn dev processes, or
// goroutines) install once and share the result. An installation is
// bounded in time (DefaultTimeout, WithTimeout) and in the memory its
// output takes (a bounded tail, lines cut at a cap).
package deps

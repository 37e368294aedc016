// Package logtest checks, in tests, that a program's log output is in kfn's
// layout (package logging): every line a JSON object with time, level, msg
// and component.
package logtest

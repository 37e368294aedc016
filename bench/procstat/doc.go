// Package procstat reads what the benchmark programs report about a
// process and the machine from Linux's /proc: a process's peak and current
// resident memory, and the load average.
package procstat

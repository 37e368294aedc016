// Package procstat reads what the benchmark programs report about a
// process and the machine from Linux's /proc: a process's peak and current
// resident memory, the load average, and the share of the machine's CPU
// time that the host of a virtual machine took from it (steal).
package procstat

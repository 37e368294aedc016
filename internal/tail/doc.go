// Package tail keeps the end of a process's output: a [Buffer] is an
// io.Writer that holds only the last bytes written to it, so that an error
// about a process that failed can quote what it said last without holding
// all the output of a long run in memory.
package tail

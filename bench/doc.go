// Package bench holds dsh's end-to-end benchmarks: harness overhead per
// tool step, peak memory of a long run, start-up time and time to the
// first model request. They run against the scripted fake model server on
// loopback. Figures and the commands that produced them are in README.md.
package bench

package agent

// SetPreparedHeader replaces the encoding PrepareHeader made, so that a
// test can tell whether a call used it.
func SetPreparedHeader(a *Agent, raw []byte) { a.prepared.raw = raw }

package server

import (
	"net"
	"net/http"
)

// WithStateHook is l with f called on every connection state change,
// after the cap has recorded it: the tests await the server's view of a
// connection instead of sleeping.
func WithStateHook(l Limits, f func(net.Conn, http.ConnState)) Limits {
	l.onState = f
	return l
}

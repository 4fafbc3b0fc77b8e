package server

import (
	"errors"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// codeOf finds the stable code of a host or registry error; a
// configuration error (an unknown model, preset or effort) is the
// caller's mistake, INVALID_ARGUMENT.
func codeOf(err error) (string, bool) {
	var he *host.Error
	if errors.As(err, &he) {
		return he.Code, true
	}
	var we *workspace.Error
	if errors.As(err, &we) {
		return we.Code, true
	}
	var se *sessionquery.Error
	if errors.As(err, &se) {
		return se.Code, true
	}
	var ce *app.ConfigError
	if errors.As(err, &ce) {
		return CodeInvalidArgument, true
	}
	return "", false
}

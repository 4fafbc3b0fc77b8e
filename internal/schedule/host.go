package schedule

import (
	"context"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

// OriginKind is the header origin of a scheduled run's session.
const OriginKind = "schedule"

// HostStarter fires schedules through a session host: each firing is a
// fresh session whose header origin names the schedule and fire time.
type HostStarter struct{ Host *host.Host }

// Start implements [Starter].
func (h HostStarter) Start(ctx context.Context, s Schedule, fire time.Time) (string, error) {
	perm, approval := s.SessionChoices()
	info, err := h.Host.Create(ctx, host.CreateRequest{
		Cwd: s.Cwd, Model: s.Model, Permission: perm, Approval: approval, Headless: true,
		Origin: &host.Origin{Kind: OriginKind, Info: session.OriginInfo{ID: s.ID, FireTime: fire.UTC().Format(time.RFC3339Nano)}},
	})
	if err != nil {
		return "", err
	}
	id := info.Header.ID
	if err := h.Host.Send(ctx, id, agent.NewUserMessage(s.Prompt), host.DeliveryQueue); err != nil {
		return id, err
	}
	return id, nil
}

// Wait implements [Starter]: the run lasts until the session is idle
// with nothing pending (dsh run's policy).
func (h HostStarter) Wait(ctx context.Context, id string) error {
	_, err := h.Host.RunUntilIdle(ctx, id)
	return err
}

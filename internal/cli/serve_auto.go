package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/github"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/schedule"
	"github.com/dsh-dev/dsh/internal/secretscreen"
	"github.com/dsh-dev/dsh/internal/server"
)

// automation is what dsh serve runs besides the API: the schedule runner
// and, with --github-webhook, the webhook listener.
type automation struct {
	once sync.Once
	stop func()
}

// startAutomation starts the schedule runner and the webhook listener;
// stop ends both (idempotent) and waits for what they started.
func startAutomation(ctx context.Context, a *app.App, h *host.Host, ghAddr string, stdio IO) (*automation, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stdio.Stderr, "dsh serve: "+format+"\n", args...)
	}
	var hook *github.Handler
	var hs *http.Server
	var served chan struct{}
	if ghAddr != "" {
		gc := a.Config.GitHub
		if gc.WebhookSecretEnv == "" {
			return nil, &app.ConfigError{Err: errors.New("--github-webhook needs github.webhook_secret_env in config.yaml")}
		}
		secret := os.Getenv(gc.WebhookSecretEnv)
		if secret == "" {
			return nil, &app.ConfigError{Err: fmt.Errorf("--github-webhook: the variable %s (github.webhook_secret_env) is empty", gc.WebhookSecretEnv)}
		}
		token := ""
		if gc.TokenEnv != "" {
			token = os.Getenv(gc.TokenEnv)
		}
		// Both stay in this process only: no command a session runs (bash,
		// hooks, external agents) inherits them, whatever their names.
		_ = os.Unsetenv(gc.WebhookSecretEnv)
		if gc.TokenEnv != "" {
			_ = os.Unsetenv(gc.TokenEnv)
		}
		for _, as := range gc.TrustedAssociations {
			if !slices.Contains(github.Associations, as) {
				return nil, &app.ConfigError{Err: fmt.Errorf("github.trusted_associations: unknown association %q (want one of %s)", as, strings.Join(github.Associations, ", "))}
			}
		}
		var keyVars []string
		for _, p := range a.Config.Providers {
			keyVars = append(keyVars, p.APIKeyEnv)
		}
		// What a review must not post, read when it is screened: the
		// serve token (it may be written after this), the user's ssh
		// keys, the providers' keys whatever their variables' names.
		home, _ := os.UserHomeDir()
		secrets := func() []string {
			return append(secretscreen.FileValues(append(secretscreen.SSHKeys(home), server.TokenPath(a.Home))...),
				secretscreen.EnvValues(os.Environ(), keyVars...)...)
		}
		cfg := github.Config{Secret: []byte(secret), Token: token, APIURL: gc.APIURL, Trigger: gc.Trigger, Model: gc.Model,
			WorktreeDir: filepath.Join(a.Home, "github", "worktrees"),
			Trusted:     gc.TrustedAssociations, ReviewLabel: gc.ReviewLabel, AllowWeb: gc.AllowWeb, Secrets: secrets}
		// The handler sets the body's own deadline; a shorter serve
		// read_timeout must still hold on this port.
		if rt := serveLimits(a, stdio).ReadTimeout; rt > 0 && rt < github.DefaultBodyTimeout {
			cfg.BodyTimeout = rt
		}
		for _, r := range gc.Repositories {
			rule := github.Rule{Repo: r.Repo, Path: r.Path, Permission: r.Permission}
			if err := rule.Validate(); err != nil {
				return nil, &app.ConfigError{Err: fmt.Errorf("github.repositories: %w", err)}
			}
			cfg.Rules = append(cfg.Rules, rule)
		}
		client := &github.Client{BaseURL: gc.APIURL, Token: token}
		hook = github.New(cfg, a.Store, &github.HostReviewer{Host: h, Config: cfg, Client: client}, logf)
		ln, err := net.Listen("tcp", ghAddr)
		if err != nil {
			hook.Close()
			return nil, fmt.Errorf("--github-webhook: %w", err)
		}
		fmt.Fprintf(stdio.Stdout, "dsh serve github webhook listening on http://%s/github\n", ln.Addr())
		lim := serveLimits(a, stdio)
		lim.MaxConns = a.Config.Serve.WebhookMaxConns
		var capped net.Listener
		hs, capped = server.NewHTTPServer(ln, hook, server.WebhookLimits(lim))
		served = make(chan struct{})
		go func() {
			defer close(served)
			_ = hs.Serve(capped)
		}()
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	runner := &schedule.Runner{Store: a.Store, Starter: schedule.HostStarter{Host: h}, Logf: logf}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(rctx)
	}()
	au := &automation{}
	au.stop = func() {
		au.once.Do(func() {
			if hs != nil {
				sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
				if err := hs.Shutdown(sctx); err != nil {
					_ = hs.Close()
				}
				scancel()
				<-served
				hook.Close()
			}
			cancel()
			<-done
		})
	}
	return au, nil
}

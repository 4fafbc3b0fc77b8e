package leakcheck

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestCheckSeesBlockedGoroutine(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go func() {
		close(started)
		<-stop
	}()
	<-started
	leaked := Check(0)
	if len(leaked) != 1 || !strings.Contains(leaked[0], "TestCheckSeesBlockedGoroutine") {
		t.Fatalf("leaked = %q", leaked)
	}
	close(stop)
	if leaked := Check(time.Minute); len(leaked) != 0 {
		t.Fatalf("still leaked after the goroutine ended: %q", leaked)
	}
}

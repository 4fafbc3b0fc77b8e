package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Self returns the Owner describing this process, with label.
func Self(label string) Owner {
	host, _ := os.Hostname()
	start, _, _ := procIdentity(os.Getpid())
	return Owner{PID: os.Getpid(), Host: host, Start: start, Label: label}
}

// procIdentity returns "bootid:starttime" for pid, read from /proc, and
// whether the process still runs (it is not a zombie).
func procIdentity(pid int) (id string, running bool, err error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false, err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false, err
	}
	// The command name (field 2) is parenthesized and may hold spaces and
	// parentheses: the fields after it follow the last ')'. Field 3 is
	// the state, field 22 the start time.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", false, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	running = f[0] != "Z" && f[0] != "X"
	return strings.TrimSpace(string(boot)) + ":" + f[19], running, nil
}

// provablyDead reports whether o is a process of this host that no
// longer runs: its pid is gone, is a zombie, or now belongs to another
// process (a different start time, or a different boot). A holder on
// another host, or one this host cannot check, is never provably dead;
// only its lease's expiry frees the session.
func provablyDead(o Owner) bool {
	host, err := os.Hostname()
	if err != nil || o.Host != host || o.PID <= 0 || o.Start == "" {
		return false
	}
	id, running, err := procIdentity(o.PID)
	if err == nil {
		return !running || id != o.Start
	}
	// No /proc entry: dead if the kernel agrees the pid does not exist.
	return errors.Is(err, os.ErrNotExist) && errors.Is(syscall.Kill(o.PID, 0), syscall.ESRCH)
}

//go:build linux

package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The session server and dsh talk over a stream UNIX socket (the
// server's stdin): each message is a 4-byte big-endian length and a JSON
// serverMsg. A run request carries the command's stdin and output as
// SCM_RIGHTS on the same sendmsg; the kernel delivers them with the
// message's first bytes, so the receiver queues descriptors as they come
// and each run claims the next two. A stream rather than SEQPACKET: a
// command line and environment may exceed a socket buffer.

// maxServerMsg bounds one message: more than exec accepts for a
// command line and environment together.
const maxServerMsg = 16 << 20

// Operations of the protocol.
const (
	opRun     = "run"     // dsh → server: start a command (two fds)
	opSignal  = "signal"  // dsh → server: signal the running command's group
	opReady   = "ready"   // server → dsh: set up, taking commands
	opStarted = "started" // server → dsh: the command runs
	opExit    = "exit"    // server → dsh: the command ended and its leftovers are gone
	opError   = "error"   // server → dsh: a request was refused
)

// serverMsg is one message, either way.
type serverMsg struct {
	Op   string   `json:"op"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Spec is the command's confinement (Landlock rules, the socket
	// gate, TMPDIR), as the per-call helper would get it.
	Spec *helperSpec `json:"spec,omitempty"`
	Sig  int         `json:"sig,omitempty"`
	Code int         `json:"code,omitempty"`
	Err  string      `json:"err,omitempty"`
}

// msgConn frames serverMsgs over a stream UNIX socket.
type msgConn struct {
	c   *net.UnixConn
	wmu sync.Mutex // one message at a time on the wire

	// Receiving side: one reader at a time.
	buf  []byte
	fds  []int
	rbuf []byte // what one read fills, kept across reads
	oob  []byte
}

func newMsgConn(f *os.File) (*msgConn, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("not a UNIX socket")
	}
	return &msgConn{c: uc}, nil
}

// send writes m, passing files with it.
func (m *msgConn) send(msg serverMsg, files ...*os.File) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	frame := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(frame, uint32(len(body)))
	frame = append(frame, body...)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	n, _, err := m.c.WriteMsgUnix(frame, oob, nil)
	if err != nil {
		return err
	}
	if n < len(frame) {
		_, err = m.c.Write(frame[n:])
	}
	return err
}

// recv reads the next message and, for a run, the two descriptors that
// came with it (the caller owns them).
func (m *msgConn) recv() (serverMsg, []int, error) {
	var msg serverMsg
	for {
		if len(m.buf) >= 4 {
			n := int(binary.BigEndian.Uint32(m.buf))
			if n > maxServerMsg {
				return msg, nil, fmt.Errorf("message of %d bytes is too large", n)
			}
			if len(m.buf) >= 4+n {
				err := json.Unmarshal(m.buf[4:4+n], &msg)
				m.buf = append(m.buf[:0], m.buf[4+n:]...)
				if err != nil {
					return msg, nil, fmt.Errorf("bad message: %w", err)
				}
				if msg.Op != opRun {
					return msg, nil, nil
				}
				if len(m.fds) < 2 {
					return msg, nil, errors.New("run request without its descriptors")
				}
				fds := m.fds[:2:2]
				m.fds = m.fds[2:]
				return msg, fds, nil
			}
		}
		if m.rbuf == nil {
			m.rbuf = make([]byte, 64<<10)
			m.oob = make([]byte, unix.CmsgSpace(8*4))
		}
		b, oob := m.rbuf, m.oob
		n, oobn, _, _, err := m.c.ReadMsgUnix(b, oob)
		if oobn > 0 {
			if scms, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for _, s := range scms {
					if fds, ferr := unix.ParseUnixRights(&s); ferr == nil {
						for _, fd := range fds {
							unix.CloseOnExec(fd)
						}
						m.fds = append(m.fds, fds...)
					}
				}
			}
		}
		if n > 0 {
			m.buf = append(m.buf, b[:n]...)
		}
		if err != nil {
			return msg, nil, err
		}
		if n == 0 {
			return msg, nil, errors.New("connection closed")
		}
	}
}

// close closes the connection; a recv in progress returns an error.
func (m *msgConn) close() { m.c.Close() }

// dropFds closes the descriptors received but not claimed; the reader
// calls it when it stops.
func (m *msgConn) dropFds() {
	for _, fd := range m.fds {
		unix.Close(fd)
	}
	m.fds = nil
}

package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultSocket is where serve listens and the CLI connects.
const DefaultSocket = "/run/ublk-raid/control.sock"

// Listen creates the control socket at path: its directory is created
// 0700 if missing (an existing directory is left as it is), the socket is
// made 0600, so only root (the daemon's user) can talk to it. A socket
// file left by a daemon that died is replaced; one a live daemon answers
// on is not (error: another daemon runs), nor is anything that is not a
// socket. Closing the listener removes the
// socket file.
func Listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("control socket directory: %w", err)
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			// Connecting to a path that is no socket is refused too
			// (ECONNREFUSED): never remove what is not a socket (a
			// state file named by mistake).
			return nil, fmt.Errorf("control socket %s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("another ublk-raid daemon is listening on %s", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("control socket %s exists and does not answer: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale control socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

package daemon

import (
	"fmt"
	"net"
	"os"
)

// Notify sends state (e.g. "READY=1", "STATUS=serving 2 arrays") to the
// service manager, as sd_notify(3) does, without cgo: one datagram to the
// unix socket named by $NOTIFY_SOCKET (a name starting with @ is an
// abstract socket). Without $NOTIFY_SOCKET it does nothing.
func Notify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if name[0] != '/' && name[0] != '@' {
		return fmt.Errorf("NOTIFY_SOCKET=%q: not a unix socket path", name)
	}
	// Go's unix sockaddr turns a leading @ into the abstract namespace's NUL.
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

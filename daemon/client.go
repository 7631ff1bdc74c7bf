package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
)

// ErrNotRunning means no daemon answers on the control socket.
var ErrNotRunning = errors.New("no ublk-raid daemon is running")

// RemoteError is an error answer of the daemon.
type RemoteError struct {
	Status int    // HTTP status
	Msg    string // the daemon's one-line message
	body   []byte // the answer (DeleteAllError)
}

func (e *RemoteError) Error() string { return e.Msg }

// Client talks to the daemon over its control socket. It is safe for
// concurrent use.
type Client struct {
	Socket string
	hc     *http.Client
}

// NewClient returns a client of the daemon listening on socket.
func NewClient(socket string) *Client {
	return &Client{Socket: socket, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}}
}

// do sends method path with body in (if not nil) and decodes the answer
// into out (if not nil).
func (c *Client) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://ublk-raid"+APIVersion+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("%w (no socket at %s): start it with `systemctl start ublk-raid` or `ublk-raid serve`", ErrNotRunning, c.Socket)
		case errors.Is(err, os.ErrPermission):
			return fmt.Errorf("permission denied on %s: the daemon is root's (run as root)", c.Socket)
		}
		return fmt.Errorf("talking to the daemon on %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("daemon answered %s", resp.Status)
		}
		return &RemoteError{Status: resp.StatusCode, Msg: eb.Error, body: b}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decoding the daemon's answer: %w", err)
		}
	}
	return nil
}

func arrayPath(n int) string { return "/arrays/" + strconv.Itoa(n) }

// Add creates or assembles an array.
func (c *Client) Add(req AddRequest) (Array, error) {
	var a Array
	return a, c.do(http.MethodPost, "/arrays", req, &a)
}

// Delete deletes array n.
func (c *Client) Delete(n int) (DeleteResult, error) {
	var r DeleteResult
	return r, c.do(http.MethodDelete, arrayPath(n), nil, &r)
}

// DeleteAll deletes every array of the daemon. When some are not
// deleted (in use) the result lists those that were, with the error.
func (c *Client) DeleteAll() (DeleteResult, error) {
	var r DeleteResult
	err := c.do(http.MethodDelete, "/arrays", nil, &r)
	var re *RemoteError
	if errors.As(err, &re) {
		var e DeleteAllError
		if json.Unmarshal(re.body, &e) == nil {
			r = e.DeleteResult
		}
	}
	return r, err
}

// List lists the arrays.
func (c *Client) List() ([]Array, error) {
	var l ArrayList
	return l.Arrays, c.do(http.MethodGet, "/arrays", nil, &l)
}

// Detail describes array n.
func (c *Client) Detail(n int) (Array, error) {
	var a Array
	return a, c.do(http.MethodGet, arrayPath(n), nil, &a)
}

// MemberOp posts a member operation (fail, remove, re-add, replace) on
// array n.
func (c *Client) MemberOp(n int, op string, req MemberRequest) (Array, error) {
	var a Array
	return a, c.do(http.MethodPost, arrayPath(n)+"/"+op, req, &a)
}

// ArrayOp posts an array operation (check, repair) on array n.
func (c *Client) ArrayOp(n int, op string) (Array, error) {
	var a Array
	return a, c.do(http.MethodPost, arrayPath(n)+"/"+op, nil, &a)
}

// Grow grows array n (see GrowRequest).
func (c *Client) Grow(n int, req GrowRequest) (Array, error) {
	var a Array
	return a, c.do(http.MethodPost, arrayPath(n)+"/grow", req, &a)
}

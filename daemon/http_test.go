package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

func TestListenPermissions(t *testing.T) {
	sock := daemontest.Serve(t, daemontest.New())
	for p, want := range map[string]os.FileMode{filepath.Dir(sock): 0o700 | os.ModeDir, sock: 0o600 | os.ModeSocket} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if _, err := daemon.Listen(sock); err == nil || !strings.Contains(err.Error(), "another ublk-raid daemon") {
		t.Fatalf("second daemon.Listen on a live socket: %v", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	// A socket file nobody listens on, as a killed daemon leaves it.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("stale socket not left:", err)
	}
	l2, err := daemon.Listen(sock)
	if err != nil {
		t.Fatalf("daemon.Listen over a stale socket: %v", err)
	}
	l2.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left after Close: %v", err)
	}
}

func TestClientNotRunning(t *testing.T) {
	c := daemon.NewClient(filepath.Join(t.TempDir(), "none.sock"))
	_, err := c.List()
	if !errors.Is(err, daemon.ErrNotRunning) || !strings.Contains(err.Error(), "systemctl start ublk-raid") {
		t.Fatalf("List without a daemon: %v", err)
	}
}

func TestAPI(t *testing.T) {
	c := daemon.NewClient(daemontest.Serve(t, daemontest.New()))
	if l, err := c.List(); err != nil || len(l) != 0 {
		t.Fatalf("empty list: %v %v", l, err)
	}
	a, err := c.Add(daemon.AddRequest{Level: "1", Members: []string{"/dev/x", "/dev/y"}, Name: "tank"})
	if err != nil || a.Device != "/dev/ublkb0" || a.Level != "raid1" || len(a.Members) != 2 {
		t.Fatalf("add: %+v %v", a, err)
	}
	seven := 7
	if a, err = c.Add(daemon.AddRequest{Level: "0", Members: []string{"/dev/z", "/dev/w"}, Number: &seven}); err != nil || a.Number != 7 {
		t.Fatalf("add -n 7: %+v %v", a, err)
	}
	if l, err := c.List(); err != nil || len(l) != 2 || l[0].Number != 0 || l[1].Number != 7 {
		t.Fatalf("list: %+v %v", l, err)
	}
	if a, err = c.MemberOp(0, "fail", daemon.MemberRequest{Member: "/dev/y"}); err != nil || a.State != "degraded" || a.Members[1].State != "faulty" {
		t.Fatalf("fail: %+v %v", a, err)
	}
	if a, err = c.MemberOp(0, "remove", daemon.MemberRequest{Member: "1"}); err != nil || a.Members[1].State != "missing" {
		t.Fatalf("remove by role: %+v %v", a, err)
	}
	if a, err = c.Detail(0); err != nil || a.MissingDisks != 1 {
		t.Fatalf("detail: %+v %v", a, err)
	}
	for _, tc := range []struct {
		call   func() error
		status int
		msg    string
	}{
		{func() error { _, err := c.Detail(3); return err }, 404, "/dev/ublkb3: no such array: not found"},
		{func() error { _, err := c.Delete(3); return err }, 404, "no such array"},
		{func() error { _, err := c.Add(daemon.AddRequest{Level: "4", Members: []string{"/dev/a"}}); return err }, 400, `level "4"`},
		{func() error {
			_, err := c.Add(daemon.AddRequest{Level: "5", Members: []string{"/dev/a", "/dev/b"}})
			return err
		}, 400, "raid5 needs 3 to 64 members, not 2"},
		{func() error { _, err := c.Add(daemon.AddRequest{Level: "1"}); return err }, 400, "at least one member"},
		{func() error {
			_, err := c.Add(daemon.AddRequest{Level: "1", Members: []string{"/dev/a", "/dev/b"}, ChunkBytes: 3000})
			return err
		}, 400, "chunk_bytes 3000"},
		{func() error {
			_, err := c.Add(daemon.AddRequest{Level: "0", Members: []string{"/dev/a", "/dev/b"}, Number: &seven})
			return err
		}, 409, "already serves"},
		{func() error {
			_, err := c.MemberOp(0, "fail", daemon.MemberRequest{Member: "/dev/x"})
			return err
		}, 409, "last copy"},
		{func() error {
			_, err := c.MemberOp(0, "fail", daemon.MemberRequest{Member: "/dev/q"})
			return err
		}, 404, "/dev/q is not a member of /dev/ublkb0"},
		{func() error {
			_, err := c.MemberOp(0, "remove", daemon.MemberRequest{Member: "/dev/x"})
			return err
		}, 409, "fail it first"},
		{func() error { _, err := c.MemberOp(0, "fail", daemon.MemberRequest{}); return err }, 400, "member: missing"},
		{func() error {
			_, err := c.MemberOp(0, "re-add", daemon.MemberRequest{Member: "/dev/y"})
			return err
		}, 501, "re-add: not available yet"},
		{func() error {
			_, err := c.MemberOp(0, "replace", daemon.MemberRequest{Member: "/dev/y", With: "/dev/v"})
			return err
		}, 501, "replace: not available yet"},
		{func() error { _, err := c.ArrayOp(0, "check"); return err }, 501, "check: not available yet"},
		{func() error { _, err := c.ArrayOp(0, "repair"); return err }, 501, "repair: not available yet"},
		{func() error { _, err := c.ArrayOp(9, "repair"); return err }, 404, "no such array"},
	} {
		err := tc.call()
		var re *daemon.RemoteError
		if !errors.As(err, &re) || re.Status != tc.status || !strings.Contains(re.Msg, tc.msg) {
			t.Errorf("got %v (%#v); want status %d and %q", err, re, tc.status, tc.msg)
		}
	}
	if r, err := c.Delete(7); err != nil || !slices.Equal(r.Deleted, []string{"/dev/ublkb7"}) {
		t.Fatalf("del: %+v %v", r, err)
	}
	if r, err := c.DeleteAll(); err != nil || !slices.Equal(r.Deleted, []string{"/dev/ublkb0"}) {
		t.Fatalf("del all: %+v %v", r, err)
	}
}

// Requests as curl --unix-socket sends them: errors are JSON too.
func TestAPIRaw(t *testing.T) {
	sock := daemontest.Serve(t, daemontest.New())
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/v1/arrays", "", 200, `"arrays": []`},
		{"POST", "/v1/arrays", `{"level":"1","members":["/dev/a","/dev/b"]}`, 201, `"device": "/dev/ublkb0"`},
		{"POST", "/v1/arrays", `{"level":"1","members":["/dev/a"],"bogus":1}`, 400, `unknown field \"bogus\"`},
		{"POST", "/v1/arrays", `{"level":`, 400, `"error": "request body:`},
		{"POST", "/v1/arrays", ``, 400, `empty body`},
		{"PUT", "/v1/arrays", ``, 405, `method not allowed`},
		{"GET", "/v1/arrays/x", "", 400, `array number \"x\"`},
		{"GET", "/v1/arrays/-1", "", 400, `array number`},
		{"GET", "/v1/arrays/0", "", 200, `"level": "raid1"`},
		{"GET", "/v1/arrays/0/fail", "", 405, `use POST`},
		{"POST", "/v1/arrays/0/explode", "{}", 404, `no endpoint POST /v1/arrays/0/explode`},
		{"GET", "/v2/arrays", "", 404, `no endpoint`},
		{"GET", "/v1/version", "", 200, `"version": "test"`},
		{"POST", "/v1/arrays/0/check", "", 501, `"error": "check: not available yet"`},
		{"DELETE", "/v1/arrays/0", "", 200, `"deleted": [`},
	} {
		req, _ := http.NewRequest(tc.method, "http://x"+tc.path, strings.NewReader(tc.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q; want %d and %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.want)
		}
	}
}

func TestAddRequestSpec(t *testing.T) {
	two := []string{"/dev/a", "/dev/b"}
	neg := -2
	for _, tc := range []struct {
		req  daemon.AddRequest
		want string // "" valid
	}{
		{daemon.AddRequest{Members: two}, ""},
		{daemon.AddRequest{Level: "raid10", Layout: "f2", Members: two}, ""},
		{daemon.AddRequest{Level: "10", Members: two, ChunkBytes: 64 << 10, Queues: 2, Depth: 64, MaxIOBytes: 1 << 20}, ""},
		{daemon.AddRequest{Level: "1", Members: two, ChunkBytes: 64 << 10}, "raid1 has no chunks"},
		{daemon.AddRequest{Level: "1"}, "at least one member"},
		{daemon.AddRequest{Level: "4", Members: two}, `level "4"`},
		{daemon.AddRequest{Level: "1", Layout: "n2", Members: two}, "raid10 only"},
		{daemon.AddRequest{Level: "10", Layout: "z9", Members: two}, "layout"},
		{daemon.AddRequest{Level: "0", Members: two, ChunkBytes: 1 << 30}, "chunk_bytes"},
		{daemon.AddRequest{Level: "1", Members: two, Name: strings.Repeat("n", 33)}, "32 bytes"},
		{daemon.AddRequest{Level: "1", Members: two, Number: &neg}, "number -2"},
		{daemon.AddRequest{Level: "1", Members: two, Queues: -1}, "queues -1"},
		{daemon.AddRequest{Level: "1", Members: two, Depth: 5000}, "depth 5000"},
		{daemon.AddRequest{Level: "1", Members: two, MaxIOBytes: 1000}, "max_io_bytes 1000"},
	} {
		_, err := tc.req.Spec()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}

// TestAddRequestForce: the force flag of an assembly reaches the array's
// spec (and is a known JSON field: unknown ones are refused).
func TestAddRequestForce(t *testing.T) {
	var req daemon.AddRequest
	dec := json.NewDecoder(strings.NewReader(`{"members": ["/dev/a", "/dev/b"], "force": true}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	s, err := req.Spec()
	if err != nil || !s.Force {
		t.Fatalf("spec %+v, %v", s, err)
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeBackend keeps arrays in memory, with the real Manager's error
// conventions.
type fakeBackend struct {
	mu     sync.Mutex
	arrays map[int]*Array
}

func newFake() *fakeBackend { return &fakeBackend{arrays: map[int]*Array{}} }

func (f *fakeBackend) Add(_ context.Context, req AddRequest) (Array, error) {
	spec, err := req.Spec()
	if err != nil {
		return Array{}, Invalid(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if req.Number != nil && *req.Number >= 0 {
		n = *req.Number
		if f.arrays[n] != nil {
			return Array{}, Refused(fmt.Errorf("%s already serves an array", DevicePath(n)))
		}
	}
	for f.arrays[n] != nil {
		n++
	}
	a := &Array{Number: n, Device: DevicePath(n), Name: req.Name, Level: spec.Level.String(), State: "active",
		RaidDisks: len(req.Members), ActiveDisks: len(req.Members), SizeBytes: 1 << 30, ChunkBytes: spec.ChunkSectors << 9}
	for i, p := range req.Members {
		a.Members = append(a.Members, Member{Role: i, Path: p, State: "active"})
	}
	f.arrays[n] = a
	return *a, nil
}

func (f *fakeBackend) Delete(n int) (DeleteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.arrays[n] == nil {
		return DeleteResult{}, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
	}
	delete(f.arrays, n)
	return DeleteResult{Deleted: []string{DevicePath(n)}}, nil
}

func (f *fakeBackend) DeleteAll() (DeleteResult, error) {
	res := DeleteResult{Deleted: []string{}}
	for _, a := range f.List() {
		r, err := f.Delete(a.Number)
		if err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, r.Deleted...)
	}
	return res, nil
}

func (f *fakeBackend) List() []Array {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Array
	for _, a := range f.arrays {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Array) int { return a.Number - b.Number })
	return out
}

func (f *fakeBackend) Detail(n int) (Array, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.arrays[n]; a != nil {
		return *a, nil
	}
	return Array{}, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
}

func (f *fakeBackend) member(n int, member string, op func(a *Array, m *Member) error) (Array, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.arrays[n]
	if a == nil {
		return Array{}, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
	}
	for i := range a.Members {
		m := &a.Members[i]
		if m.Path == member || strconv.Itoa(m.Role) == member {
			if err := op(a, m); err != nil {
				return Array{}, Refused(err)
			}
			return *a, nil
		}
	}
	return Array{}, fmt.Errorf("%s is not a member of %s: %w", member, a.Device, ErrNotFound)
}

func (f *fakeBackend) Fail(n int, member string) (Array, error) {
	return f.member(n, member, func(a *Array, m *Member) error {
		if m.State != "active" {
			return fmt.Errorf("role %d is already %s", m.Role, m.State)
		}
		if a.ActiveDisks == 1 {
			return fmt.Errorf("role %d holds the last copy of some data: failing it would fail the array", m.Role)
		}
		m.State = "faulty"
		a.ActiveDisks--
		a.FailedDisks++
		a.Degraded, a.State = true, "degraded"
		return nil
	})
}

func (f *fakeBackend) Remove(n int, member string) (Array, error) {
	return f.member(n, member, func(a *Array, m *Member) error {
		if m.State != "faulty" {
			return fmt.Errorf("role %d is %s: fail it first", m.Role, m.State)
		}
		m.State = "missing"
		a.FailedDisks--
		a.MissingDisks++
		return nil
	})
}

func (f *fakeBackend) na(n int, op string) (Array, error) {
	if _, err := f.Detail(n); err != nil {
		return Array{}, err
	}
	return Array{}, fmt.Errorf("%s: %w", op, ErrNotAvailable)
}
func (f *fakeBackend) ReAdd(n int, _ string) (Array, error)     { return f.na(n, "re-add") }
func (f *fakeBackend) Replace(n int, _, _ string) (Array, error) { return f.na(n, "replace") }
func (f *fakeBackend) Check(n int) (Array, error)                { return f.na(n, "check") }
func (f *fakeBackend) Repair(n int) (Array, error)               { return f.na(n, "repair") }

// serveFake serves a fake backend on a real unix socket; it returns the
// socket path.
func serveFake(t *testing.T, b Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "control.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewHandler(b, "test")}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestListenPermissions(t *testing.T) {
	sock := serveFake(t, newFake())
	for p, want := range map[string]os.FileMode{filepath.Dir(sock): 0o700 | os.ModeDir, sock: 0o600 | os.ModeSocket} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "another ublk-raid daemon") {
		t.Fatalf("second Listen on a live socket: %v", err)
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
	l2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left after Close: %v", err)
	}
}

func TestClientNotRunning(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "none.sock"))
	_, err := c.List()
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "systemctl start ublk-raid") {
		t.Fatalf("List without a daemon: %v", err)
	}
}

func TestAPI(t *testing.T) {
	c := NewClient(serveFake(t, newFake()))
	if l, err := c.List(); err != nil || len(l) != 0 {
		t.Fatalf("empty list: %v %v", l, err)
	}
	a, err := c.Add(AddRequest{Level: "1", Members: []string{"/dev/x", "/dev/y"}, Name: "tank"})
	if err != nil || a.Device != "/dev/ublkb0" || a.Level != "raid1" || len(a.Members) != 2 {
		t.Fatalf("add: %+v %v", a, err)
	}
	seven := 7
	if a, err = c.Add(AddRequest{Level: "0", Members: []string{"/dev/z", "/dev/w"}, Number: &seven}); err != nil || a.Number != 7 {
		t.Fatalf("add -n 7: %+v %v", a, err)
	}
	if l, err := c.List(); err != nil || len(l) != 2 || l[0].Number != 0 || l[1].Number != 7 {
		t.Fatalf("list: %+v %v", l, err)
	}
	if a, err = c.MemberOp(0, "fail", MemberRequest{Member: "/dev/y"}); err != nil || a.State != "degraded" || a.Members[1].State != "faulty" {
		t.Fatalf("fail: %+v %v", a, err)
	}
	if a, err = c.MemberOp(0, "remove", MemberRequest{Member: "1"}); err != nil || a.Members[1].State != "missing" {
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
		{func() error { _, err := c.Add(AddRequest{Level: "5", Members: []string{"/dev/a"}}); return err }, 400, `level "5"`},
		{func() error { _, err := c.Add(AddRequest{Level: "1"}); return err }, 400, "at least one member"},
		{func() error { _, err := c.Add(AddRequest{Level: "1", Members: []string{"a", "b"}, ChunkBytes: 3000}); return err }, 400, "chunk_bytes 3000"},
		{func() error { _, err := c.Add(AddRequest{Level: "0", Members: []string{"a", "b"}, Number: &seven}); return err }, 409, "already serves"},
		{func() error { _, err := c.MemberOp(0, "fail", MemberRequest{Member: "/dev/x"}); return err }, 409, "last copy"},
		{func() error { _, err := c.MemberOp(0, "fail", MemberRequest{Member: "/dev/q"}); return err }, 404, "/dev/q is not a member of /dev/ublkb0"},
		{func() error { _, err := c.MemberOp(0, "remove", MemberRequest{Member: "/dev/x"}); return err }, 409, "fail it first"},
		{func() error { _, err := c.MemberOp(0, "fail", MemberRequest{}); return err }, 400, "member: missing"},
		{func() error { _, err := c.MemberOp(0, "re-add", MemberRequest{Member: "/dev/y"}); return err }, 501, "re-add: not available yet"},
		{func() error { _, err := c.MemberOp(0, "replace", MemberRequest{Member: "/dev/y", With: "/dev/v"}); return err }, 501, "replace: not available yet"},
		{func() error { _, err := c.ArrayOp(0, "check"); return err }, 501, "check: not available yet"},
		{func() error { _, err := c.ArrayOp(0, "repair"); return err }, 501, "repair: not available yet"},
		{func() error { _, err := c.ArrayOp(9, "repair"); return err }, 404, "no such array"},
	} {
		err := tc.call()
		var re *RemoteError
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
	sock := serveFake(t, newFake())
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
	two := []string{"a", "b"}
	neg := -2
	for _, tc := range []struct {
		req  AddRequest
		want string // "" valid
	}{
		{AddRequest{Members: two}, ""},
		{AddRequest{Level: "raid10", Layout: "f2", Members: two}, ""},
		{AddRequest{Level: "1", Members: two, ChunkBytes: 64 << 10, Queues: 2, Depth: 64, MaxIOBytes: 1 << 20}, ""},
		{AddRequest{Level: "1"}, "at least one member"},
		{AddRequest{Level: "4", Members: two}, `level "4"`},
		{AddRequest{Level: "1", Layout: "n2", Members: two}, "raid10 only"},
		{AddRequest{Level: "10", Layout: "z9", Members: two}, "layout"},
		{AddRequest{Level: "1", Members: two, ChunkBytes: 1 << 30}, "chunk_bytes"},
		{AddRequest{Level: "1", Members: two, Name: strings.Repeat("n", 33)}, "32 bytes"},
		{AddRequest{Level: "1", Members: two, Number: &neg}, "number -2"},
		{AddRequest{Level: "1", Members: two, Queues: -1}, "queues -1"},
		{AddRequest{Level: "1", Members: two, Depth: 5000}, "depth 5000"},
		{AddRequest{Level: "1", Members: two, MaxIOBytes: 1000}, "max_io_bytes 1000"},
	} {
		_, err := tc.req.Spec()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}

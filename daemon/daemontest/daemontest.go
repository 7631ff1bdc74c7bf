package daemontest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
)

// Backend keeps arrays in memory, with the real Manager's error
// conventions.
type Backend struct {
	// Requests counts the calls of Backend methods.
	Requests *atomic.Int64

	mu     sync.Mutex
	arrays map[int]*daemon.Array
}

// New returns an empty fake.
func New() *Backend { return &Backend{arrays: map[int]*daemon.Array{}, Requests: new(atomic.Int64)} }

func (f *Backend) Add(_ context.Context, req daemon.AddRequest) (daemon.Array, error) {
	f.Requests.Add(1)
	spec, err := req.Spec()
	if err != nil {
		return daemon.Array{}, daemon.Invalid(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if req.Number != nil && *req.Number >= 0 {
		n = *req.Number
		if f.arrays[n] != nil {
			return daemon.Array{}, daemon.Refused(fmt.Errorf("%s already serves an array", daemon.DevicePath(n)))
		}
	}
	for f.arrays[n] != nil {
		n++
	}
	a := &daemon.Array{Number: n, Device: daemon.DevicePath(n), Name: req.Name, Level: spec.Level.String(), State: "active",
		RaidDisks: len(req.Members), ActiveDisks: len(req.Members), SizeBytes: 1 << 30, ChunkBytes: spec.ChunkSectors << 9}
	for i, p := range req.Members {
		a.Members = append(a.Members, daemon.Member{Role: i, Path: p, State: "active"})
	}
	f.arrays[n] = a
	return *a, nil
}

func (f *Backend) Delete(n int) (daemon.DeleteResult, error) {
	f.Requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.arrays[n] == nil {
		return daemon.DeleteResult{}, fmt.Errorf("%s: no such array: %w", daemon.DevicePath(n), daemon.ErrNotFound)
	}
	delete(f.arrays, n)
	return daemon.DeleteResult{Deleted: []string{daemon.DevicePath(n)}}, nil
}

func (f *Backend) DeleteAll() (daemon.DeleteResult, error) {
	f.Requests.Add(1)
	res := daemon.DeleteResult{Deleted: []string{}}
	for _, a := range f.List() {
		r, err := f.Delete(a.Number)
		if err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, r.Deleted...)
	}
	return res, nil
}

func (f *Backend) List() []daemon.Array {
	f.Requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []daemon.Array
	for _, a := range f.arrays {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b daemon.Array) int { return a.Number - b.Number })
	return out
}

func (f *Backend) Detail(n int) (daemon.Array, error) {
	f.Requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.arrays[n]; a != nil {
		return *a, nil
	}
	return daemon.Array{}, fmt.Errorf("%s: no such array: %w", daemon.DevicePath(n), daemon.ErrNotFound)
}

// SetState sets array n's state ("active", "degraded", "failed").
func (f *Backend) SetState(n int, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arrays[n].State = state
	f.arrays[n].Degraded = state != "active"
}

func (f *Backend) member(n int, member string, op func(a *daemon.Array, m *daemon.Member) error) (daemon.Array, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.arrays[n]
	if a == nil {
		return daemon.Array{}, fmt.Errorf("%s: no such array: %w", daemon.DevicePath(n), daemon.ErrNotFound)
	}
	for i := range a.Members {
		m := &a.Members[i]
		if m.Path == member || strconv.Itoa(m.Role) == member {
			if err := op(a, m); err != nil {
				return daemon.Array{}, daemon.Refused(err)
			}
			return *a, nil
		}
	}
	return daemon.Array{}, fmt.Errorf("%s is not a member of %s: %w", member, a.Device, daemon.ErrNotFound)
}

func (f *Backend) Fail(n int, member string) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.member(n, member, func(a *daemon.Array, m *daemon.Member) error {
		if m.State == "faulty" {
			return nil // as the manager (md's fail of a faulty device)
		}
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

func (f *Backend) Remove(n int, member string) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.member(n, member, func(a *daemon.Array, m *daemon.Member) error {
		if m.State != "faulty" {
			return fmt.Errorf("role %d is %s: fail it first", m.Role, m.State)
		}
		m.State = "missing"
		a.FailedDisks--
		a.MissingDisks++
		return nil
	})
}

func (f *Backend) na(n int, op string) (daemon.Array, error) {
	if _, err := f.Detail(n); err != nil {
		return daemon.Array{}, err
	}
	return daemon.Array{}, fmt.Errorf("%s: %w", op, daemon.ErrNotAvailable)
}
func (f *Backend) ReAdd(n int, _ string) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "re-add")
}

func (f *Backend) AddSpare(n int, _ []string, _ bool) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "add-spare")
}

func (f *Backend) Replace(n int, _, _ string, _ bool) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "replace")
}

func (f *Backend) Check(n int) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "check")
}

func (f *Backend) Grow(n int, _ uint64) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "grow")
}

func (f *Backend) Repair(n int) (daemon.Array, error) {
	f.Requests.Add(1)
	return f.na(n, "repair")
}

// Serve serves b on a real unix socket in a test directory (removed with
// the test); it returns the socket path.
func Serve(t testing.TB, b daemon.Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "control.sock")
	l, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: daemon.NewHandler(b, "test")}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

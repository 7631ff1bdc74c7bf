package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe/probetest"
)

// Operator safety through the control API, on file-backed members: a
// refused command leaves every member's bytes and the array's state as
// they were. (Requests are sent as JSON so that the tests build on the
// code before --force existed too.)

// files makes n sparse files of size bytes.
func files(t *testing.T, n int, size int64) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// hashes are the sha256 of each existing file of paths.
func hashes(t *testing.T, paths ...string) map[string][32]byte {
	t.Helper()
	h := map[string][32]byte{}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h[p] = sha256.Sum256(b)
	}
	return h
}

func sameHashes(t *testing.T, what string, before, after map[string][32]byte) {
	t.Helper()
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s: %s was written", what, p)
		}
	}
}

// post sends body to path on m's control API; a panic of the handler (a
// request the Manager went on to serve: the test's arrays have no ublk
// device) counts as accepted.
func post(t *testing.T, m *Manager, path string, body any) (code int, msg string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			code, msg = http.StatusOK, fmt.Sprintf("accepted (then: %v)", r)
		}
	}()
	w := httptest.NewRecorder()
	NewHandler(m, "test").ServeHTTP(w, httptest.NewRequest(http.MethodPost, APIVersion+path, bytes.NewReader(b)))
	var eb ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &eb)
	return w.Code, eb.Error
}

// servedMirror serves a new raid1 over two files as array 0 of a Manager
// without a kernel; it returns the Manager, the array and its members.
func servedMirror(t *testing.T, size int64) (*Manager, *array.Array, []string) {
	t.Helper()
	paths := files(t, 2, size)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m := NewManager(nil, ManagerOptions{})
	m.arrays[0] = &served{n: 0, a: a}
	return m, a, paths
}

// otherArrayMember is a member of a stopped raid1 of two files.
func otherArrayMember(t *testing.T, size int64) string {
	t.Helper()
	ps := files(t, 2, size)
	o, err := array.Open(ps, array.CreateSpec{Name: "other", Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetClean(true); err != nil {
		t.Fatal(err)
	}
	o.Close()
	return ps[0]
}

func withSignature(t *testing.T, size int64, kind string) string {
	t.Helper()
	p := files(t, 1, size)[0]
	probetest.Write(t, p, kind)
	return p
}

// A replace whose new device cannot be used changes nothing: the old
// member stays active, no superblock is rewritten (issue "Operator
// safety" 1 and 2).
func TestReplaceRefusedChangesNothing(t *testing.T) {
	const size = 8 << 20
	for _, tc := range []struct {
		name string
		with func(t *testing.T) string
		want string
	}{
		{"too small", func(t *testing.T) string { return files(t, 1, size/2)[0] }, "needs at least"},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nonexistent") }, "does not exist"},
		{"a directory", func(t *testing.T) string { return t.TempDir() }, "neither a block device nor a regular file"},
		{"another array's member", func(t *testing.T) string { return otherArrayMember(t, size) }, `superblock of array`},
		{"ext4", func(t *testing.T) string { return withSignature(t, size, "ext4") }, "ext4 filesystem"},
		{"md 1.2", func(t *testing.T) string { return withSignature(t, size, "md1.2") }, "md superblock 1.2"},
		{"LUKS", func(t *testing.T) string { return withSignature(t, size, "luks") }, "LUKS header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, a, paths := servedMirror(t, size)
			with := tc.with(t)
			before, st := hashes(t, append(paths, with)...), a.Status()
			code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": paths[1], "with": with})
			t.Log(msg)
			if code != http.StatusConflict || !strings.Contains(msg, tc.want) {
				t.Errorf("replace with %s: %d %q; want 409 naming %q", tc.name, code, msg, tc.want)
			}
			sameHashes(t, "refused replace", before, hashes(t, append(paths, with)...))
			after := a.Status()
			if after.Events != st.Events || after.ActiveDisks != 2 || after.Members[1].State != "active" || after.Members[1].Path != paths[1] {
				t.Errorf("refused replace changed the array: %+v, was %+v", after, st)
			}
		})
	}
}

// Members of a new array and its blank spares that carry a signature of
// data are refused, naming what and where, and nothing is written
// (issue "Operator safety" 3).
func TestAddRefusesDevicesWithData(t *testing.T) {
	const size = 8 << 20
	five := 5
	for kind, typ := range probetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			m := NewManager(nil, ManagerOptions{})
			paths := files(t, 3, size)
			probetest.Write(t, paths[1], kind)
			before := hashes(t, paths...)
			code, msg := post(t, m, "/arrays", AddRequest{Members: paths[:2], Level: "1", Number: &five})
			t.Log(msg)
			if code != http.StatusConflict || !strings.Contains(msg, paths[1]) || !strings.Contains(msg, typ) {
				t.Errorf("add over %s: %d %q; want 409 naming %s and %q", kind, code, msg, paths[1], typ)
			}
			// The same device as a spare of a new array.
			code, msg = post(t, m, "/arrays", AddRequest{Members: []string{paths[0], paths[2]}, Level: "1", Number: &five, Spares: paths[1:2]})
			if code != http.StatusConflict || !strings.Contains(msg, typ) {
				t.Errorf("add with a %s spare: %d %q; want 409 naming %q", kind, code, msg, typ)
			}
			sameHashes(t, "refused add", before, hashes(t, paths...))
		})
	}
}

// add -n N --spare refuses a device that holds data; nothing changes.
func TestAddSpareRefusesDevicesWithData(t *testing.T) {
	const size = 8 << 20
	for _, kind := range []string{"xfs", "gpt", "lvm2", "md1.0", "swap"} {
		t.Run(kind, func(t *testing.T) {
			m, a, paths := servedMirror(t, size)
			sp := withSignature(t, size, kind)
			before, st := hashes(t, append(paths, sp)...), a.Status()
			code, msg := post(t, m, "/arrays/0/add-spare", map[string]string{"member": sp})
			if code != http.StatusConflict || !strings.Contains(msg, probetest.Kinds[kind]) {
				t.Errorf("add-spare of %s: %d %q; want 409 naming %q", kind, code, msg, probetest.Kinds[kind])
			}
			sameHashes(t, "refused add-spare", before, hashes(t, append(paths, sp)...))
			if after := a.Status(); after.Events != st.Events || after.SpareDisks != 0 {
				t.Errorf("refused add-spare changed the array: %+v", after)
			}
		})
	}
}

// re-add by role number answers as the other member operations do: a
// role the array does not have is not found (404), a role whose device
// was removed is refused by the array's state (409, exit 1), not bad
// usage (400, exit 2): the request is well formed.
func TestReAddRoleNumberStatuses(t *testing.T) {
	m, a, _ := servedMirror(t, 8<<20)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		member string
		code   int
	}{{"7", http.StatusNotFound}, {"1", http.StatusConflict}} {
		if code, msg := post(t, m, "/arrays/0/re-add", map[string]string{"member": tc.member}); code != tc.code {
			t.Errorf("re-add %s: %d %q; want %d", tc.member, code, msg, tc.code)
		}
	}
}

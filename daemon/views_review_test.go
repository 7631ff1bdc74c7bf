package daemon

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. List -o json of an array of the state file that did not start: the
// fields documented as lists are lists ([]), never null, as they are for
// a running array, and the sync action is one of the documented ones.
func TestInactiveArrayJSONSchema(t *testing.T) {
	m := NewManager(nil, ManagerOptions{})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Name: "tank", Members: []string{"/dev/x", "/dev/y"}}
	w := httptest.NewRecorder()
	NewHandler(m, "test").ServeHTTP(w, httptest.NewRequest(http.MethodGet, APIVersion+"/arrays", nil))
	var raw struct {
		Arrays []map[string]json.RawMessage `json:"arrays"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil || len(raw.Arrays) != 1 {
		t.Fatalf("GET /v1/arrays: %v\n%s", err, w.Body.String())
	}
	a := raw.Arrays[0]
	for _, f := range []string{"spares", "members", "ublk_flags"} {
		if v, ok := a[f]; !ok || string(v) == "null" {
			t.Errorf("inactive array: %q is %s, want a list", f, v)
		}
	}
	var y struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(a["sync"], &y)
	if y.Action != "idle" {
		t.Errorf("inactive array: sync.action %q, want one of rebuild, resync, check, repair, idle (documented)", y.Action)
	}
}

// Found by review. Detail of an array that list shows (inactive) describes it, as mdadm
// --detail describes an inactive md array ("State : inactive"), rather
// than answering "not found" for an array list has just named.
func TestDetailOfListedInactiveArray(t *testing.T) {
	m := NewManager(nil, ManagerOptions{})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Name: "tank", Members: []string{"/dev/x", "/dev/y"}}
	listed := slices.ContainsFunc(m.List(), func(a Array) bool { return a.Number == 3 })
	a, err := m.Detail(3)
	if listed && (err != nil || a.State != "inactive") {
		t.Fatalf("list shows /dev/ublkb3 inactive; detail -n 3: %+v, %v (HTTP %d)", a.State, err, statusOf(err))
	}
}

// Found by review. While a spare is being put into a failed role (its log area reset,
// superblocks written), the device is held by the array: detail must
// show it somewhere (as a spare, or in its role), as md shows a spare
// being activated in its disk table the whole time.
func TestDetailShowsSpareBeingActivated(t *testing.T) {
	paths := files(t, 4, 32<<20)
	g := &gatedDev{entered: make(chan struct{}), release: make(chan struct{})}
	open := g.opening(paths[3])
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level5, ChunkSectors: 128, NoBitmap: true, AssumeClean: true,
		Spares: paths[3:], OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	sb := a.SBs[0]
	m := NewManager(nil, ManagerOptions{})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}}
	g.mu.Lock()
	g.armed, g.lo, g.hi = true, int64(sb.LogOffset), int64(sb.LogOffset+sb.LogBytes)
	g.mu.Unlock()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the spare's activation did not start")
	}
	v, err := m.Detail(0)
	close(g.release)
	a.WaitSync()
	if err != nil {
		t.Fatal(err)
	}
	shown := slices.Contains(v.Spares, paths[3]) ||
		slices.ContainsFunc(v.Members, func(mm Member) bool { return mm.Path == paths[3] })
	if !shown {
		t.Errorf("detail during the spare's activation: members %+v, spares %v (spare_disks %d): %s, held by the array, is not shown",
			v.Members, v.Spares, v.SpareDisks, paths[3])
	}
}

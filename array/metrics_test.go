package array

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// Metrics maps member states to node_md-like states, leaves empty slots
// out, and keeps the "member" label unique when two members share a
// base name.
func TestMetricsMembers(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, d := range []string{"a", "b", "c", "d"} {
		p := filepath.Join(dir, d, "img")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 32<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := Open(paths, CreateSpec{Name: "tank", Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.SetClean(true)
	a.Close()
	// Assembled with a blank spare (added at assembly); two failures
	// later the spare has taken one of the roles.
	sp := filepath.Join(dir, "spare")
	if err := os.WriteFile(sp, make([]byte, 32<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err = Open(paths, CreateSpec{Spares: []string{sp}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Metrics("ublkb2"); st.Members[len(st.Members)-1].State != metrics.MemberSpare {
		t.Fatalf("a spare is not counted as one: %+v", st.Members)
	} else if st.Parity != nil {
		t.Fatalf("parity metrics for a raid10: %+v", st.Parity)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	waitFor(t, "the spare takes role 1 and is rebuilt", func() bool {
		m := a.Status().Members[1]
		return m.Path == sp && m.State == "active"
	})
	a.WaitSync()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(2); err != nil {
		t.Fatal(err)
	}
	st := a.Metrics("ublkb2")
	if st.Device != "ublkb2" || st.Name != "tank" || st.Level != "raid10" || st.Layout != "n2" || st.RaidDisks != 4 ||
		st.Size != a.Engine.Geo.ArraySectors()<<9 || st.State != metrics.ArrayActive || st.Bitmap == nil {
		t.Fatalf("array metrics %+v", st)
	}
	// Recording the failures wrote the bitmap header to the members.
	if st.Bitmap.BlockWrites == 0 {
		t.Fatalf("bitmap metrics %+v: no block write counted", st.Bitmap)
	}
	want := []metrics.MemberState{metrics.MemberActive, metrics.MemberFailed, metrics.MemberActive}
	if len(st.Members) != len(want) {
		t.Fatalf("members %+v: the removed one must be left out", st.Members)
	}
	seen := map[string]bool{}
	for i, m := range st.Members {
		if m.State != want[i] {
			t.Fatalf("member %d (%s) state %v, want %v", i, m.Name, m.State, want[i])
		}
		if seen[m.Name] {
			t.Fatalf("member names not unique: %+v", st.Members)
		}
		seen[m.Name] = true
	}
}

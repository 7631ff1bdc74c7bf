package array

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"golang.org/x/sys/unix"
)

func memberFiles(t *testing.T, n int, size int64) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, "m"+string(rune('0'+i)))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	t.Cleanup(func() { forgetLate(paths) }) // (before the directory goes)
	return paths
}

// forgetLate drops the late-I/O counts of the files at paths: a test's
// given-up operations that never come back (a fake ring's) would count
// on whatever file of a later test takes the same inode.
func forgetLate(paths []string) {
	late.mu.Lock()
	defer late.mu.Unlock()
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			delete(late.n, lateKey{dev: uint64(st.Dev), ino: st.Ino})
		}
	}
}

func TestCreateThenAssemble(t *testing.T) {
	paths := memberFiles(t, 4, 64<<20)
	spec := CreateSpec{Name: "t", Level: engine.Level10, Layout: engine.LayoutF2, ChunkSectors: 128}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Created || a.Degraded() {
		t.Fatalf("created=%v degraded=%v", a.Created, a.Degraded())
	}
	g := a.Engine.Geo
	p := a.Params()
	if p.Basic.DevSectors != g.ArraySectors() || p.Basic.ChunkSectors != 128 || p.Basic.IOMinShift != 16 {
		t.Fatalf("params %+v for geometry %+v", p.Basic, g)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Created || b.Engine.Geo != g || b.Degraded() {
		t.Fatalf("assembled %+v created=%v, want %+v", b.Engine.Geo, b.Created, g)
	}
	if !b.SBs[0].Clean || b.SBs[0].Events != a.SBs[0].Events {
		t.Fatalf("superblock after clean stop: clean=%v events=%d", b.SBs[0].Clean, b.SBs[0].Events)
	}
}

// A member failure is recorded on the survivors before it is reported,
// and an assembly of the survivors runs degraded.
func TestPersistFailure(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	var failed []int
	a.OnMemberFailed = func(role int, _ string) { failed = append(failed, role) }
	st, _ := a.Engine.Fail(0)
	if err := a.persist(st); err != nil {
		t.Fatal(err)
	}
	if a.durable.Load() != st.Gen || len(failed) != 1 || failed[0] != 0 {
		t.Fatalf("durable=%d want %d, reported %v", a.durable.Load(), st.Gen, failed)
	}
	a.Close()
	b, err := Open(paths[1:], CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Degraded() || b.Engine.State().Members[0].State != engine.MemberFaulty {
		t.Fatalf("assembly of the survivor: %+v", b.Engine.State().Members)
	}
}

func TestOpenBadInput(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	before := func() [][]byte {
		var out [][]byte
		for _, p := range paths {
			b, _ := os.ReadFile(p)
			out = append(out, b)
		}
		return out
	}()
	for _, tc := range []struct {
		paths []string
		spec  CreateSpec
		want  string
	}{
		{[]string{paths[0], paths[0]}, CreateSpec{Level: engine.Level1, ChunkSectors: 128}, "given twice"},
		{[]string{paths[0], "/nonexistent"}, CreateSpec{Level: engine.Level1, ChunkSectors: 128}, "does not exist"},
		{paths[:2], CreateSpec{}, "no ublk-raid superblock"},
	} {
		create := tc.spec.ChunkSectors != 0
		if _, err := Open(tc.paths, tc.spec, create); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%v): err %v, want %q", tc.paths, err, tc.want)
		}
	}
	for i, p := range paths {
		b, _ := os.ReadFile(p)
		if !bytes.Equal(b, before[i]) {
			t.Errorf("refused Open wrote to %s", p)
		}
	}
	// Members of two different arrays.
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	c, err := Open(paths[2:], CreateSpec{Level: engine.Level0, ChunkSectors: 128}, true)
	if err == nil {
		c.Close()
		t.Fatal("a one-member raid0 was created")
	}
	other := memberFiles(t, 2, 16<<20)
	c, err = Open(other, CreateSpec{Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Open([]string{paths[0], other[1]}, CreateSpec{}, false); err == nil || !strings.Contains(err.Error(), "different arrays") {
		t.Errorf("mixed arrays: err %v", err)
	}
}

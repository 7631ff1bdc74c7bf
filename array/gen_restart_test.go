package array

import (
	"errors"
	"testing"
)

// An update no superblock took (the bitmap header took its generation)
// followed by a restart: the next process must take that generation again,
// not the one after it, or a torn update there leaves the two last copies
// of raid10 n2 x3 two generations apart, beyond assembly's slack (found by
// the array model, f2 x4, with short member timeouts).
func TestSuperblockUnusedGenerationSurvivesRestart(t *testing.T) {
	a, paths := degradedRAID10(t)
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	fail := map[string]bool{paths[0]: true, paths[2]: true}
	writeSuperblock = func(m *Member, b []byte) error {
		if fail[m.Path] {
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	if err := a.SetClean(false); err == nil {
		t.Fatal("update: no error, though no member took it")
	}
	a.Close() // (its superblock writes fail too: a kill)
	writeSuperblock = orig
	ev := func(p string) uint64 { return superblockOf(t, p).Events }
	t.Logf("after the untaken update: role 0 at %d, role 2 at %d", ev(paths[0]), ev(paths[2]))
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	// A torn update: role 2 takes it, role 0 does not.
	fail = map[string]bool{paths[0]: true}
	writeSuperblock = func(m *Member, b []byte) error {
		if fail[m.Path] {
			return errors.New("injected write error (power cut)")
		}
		return orig(m, b)
	}
	if err := b.SetClean(false); err == nil {
		t.Fatal("torn update: no error, though role 0 did not take it")
	}
	fail = map[string]bool{paths[0]: true, paths[2]: true}
	b.Close()
	writeSuperblock = orig
	e0, e2 := ev(paths[0]), ev(paths[2])
	if e2 > e0+1 || e0 > e2+1 {
		t.Errorf("role 0 at events %d, role 2 at %d: beyond assembly's slack", e0, e2)
	}
	c, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	c.Close()
}

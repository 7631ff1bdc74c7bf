package daemon

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A replace of a role whose failed member the restart left closed, refused
// because NEW is already an active member of the array, must leave the
// state file as it was.
func TestRefusedReplaceOfUnheldRoleKeepsState(t *testing.T) {
	paths := files(t, 2, 8<<20)
	b := restartedWithFailedRole1(t, paths, array.CreateSpec{NoBitmap: true, AssumeClean: true})
	m, s := serving(b, StateEntry{Members: append([]string(nil), paths...)})
	before := append([]string(nil), s.entry.Members...)
	code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": paths[0]})
	if code != 409 {
		t.Fatalf("replace 1 --with the active member: %d %q, want 409", code, msg)
	}
	if !slices.Equal(s.entry.Members, before) {
		t.Fatalf("refused replace (%d %q) changed the state entry's members: %v -> %v", code, msg, before, s.entry.Members)
	}
}

// A replace refused because NEW is too small leaves the state entry's
// write-mostly list as it was.
func TestRefusedReplaceKeepsWriteMostlyState(t *testing.T) {
	paths := files(t, 2, 8<<20)
	small := files(t, 1, 1<<20)[0]
	b := restartedWithFailedRole1(t, paths, array.CreateSpec{NoBitmap: true, AssumeClean: true, WriteMostly: paths[1:2]})
	e := StateEntry{Members: append([]string(nil), paths...), WriteMostly: []string{paths[1]}}
	_ = setWriteMostly(b, e.WriteMostly) // as restore does (logs: not held)
	m, s := serving(b, e)
	code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": small})
	if code != 409 {
		t.Fatalf("replace with a too small device: %d %q, want 409", code, msg)
	}
	if !slices.Equal(s.entry.WriteMostly, []string{paths[1]}) || !slices.Equal(s.entry.Members, paths) {
		t.Fatalf("refused replace (%d %q) changed the state entry: members %v write-mostly %v", code, msg, s.entry.Members, s.entry.WriteMostly)
	}
}

// serve --batch-io on a driver without UBLK_F_BATCH_IO: an add of a new
// array is refused for the driver's features, known before any member is
// written; the members stay blank and no device is created.
func TestAddRefusedForBatchIOWritesNothing(t *testing.T) {
	paths := files(t, 2, 8<<20)
	savedCreate, savedFeats := createDevice, driverFeatures
	t.Cleanup(func() { createDevice, driverFeatures = savedCreate, savedFeats })
	createDevice = func(*ublk.Control, ublk.Target, ublk.Config) (*ublk.Device, error) {
		t.Fatal("device created")
		return nil, nil
	}
	driverFeatures = func(*ublk.Control) (uint64, error) { return ^uint64(ublk.FlagBatchIO), nil }
	m := NewManager(nil, ManagerOptions{Queue: QueueOptions{BatchIO: true}})
	n := 7
	_, err := m.Add(context.Background(), AddRequest{Members: paths, Level: "1", Number: &n})
	if err == nil || !errors.Is(err, ublk.ErrNoBatchIO) || statusOf(err) != http.StatusConflict {
		t.Fatalf("add: %v (HTTP %d), want the driver's refusal of batched I/O (409)", err, statusOf(err))
	}
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatalf("add refused (%v), yet %s was written", err, p)
		}
	}
}

package array

import (
	"slices"
	"strings"
	"testing"
)

// Found by review: a forced assembly given a blank spare whose superblock
// write failed was refused after assemble had emptied the forced members'
// write-hole log areas (and started the array): a refusal that changed
// the members. A spare that cannot be written no longer refuses the
// assembly (md does not add it either): the array is served, with a
// warning, and the spare is not held.
func TestForcedAssemblySpareWriteFailureWarns(t *testing.T) {
	paths, _, _ := splitRaid6(t)
	spare := memberFiles(t, 1, 16<<20)[0]
	spec := CreateSpec{Level: -1, Force: true, Spares: []string{spare}, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != spare {
			return d, err
		}
		return offFailDev{Device: d, fail: func(int64) bool { return true }}, nil
	}}
	f, err := Open(paths, spec, false)
	if err != nil {
		t.Fatalf("the forced assembly was refused for a spare it could not write, after writing the members: %v", err)
	}
	defer f.Close()
	f.StopSync()
	if slices.Contains(f.Spares(), spare) {
		t.Error("the spare that failed its write is held")
	}
	if !slices.ContainsFunc(f.Warnings, func(w string) bool { return strings.Contains(w, "spares not added") }) {
		t.Errorf("no warning of the spare left out: %v", f.Warnings)
	}
}

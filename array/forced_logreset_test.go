package array

import (
	"bytes"
	"testing"
)

// Found by reviewing c34aefa. A forced assembly of a raid6 split brain puts back
// the other half's members {2,3} and empties their write-hole log areas
// (assemble, after recoverParityLog). The areas are emptied one member at
// a time and a failure refused the whole assembly: when member 3's area
// could not be written, the assembly was refused, yet member 2's area (the
// other half's entries, which the user may still want, e.g. to assemble
// that half instead) was already emptied. A refused assembly must leave
// the forced members' log areas as they were (or not be refused: a
// member failing its writes during the log replay is failed and the
// assembly goes on, TestParityLogReplayWriteErrorFailsMember's rule).
func TestForcedLogResetFailureFailsMember(t *testing.T) {
	paths, sb, ent := splitRaid6(t)
	// Forced, with member 3 failing every write to its log area.
	lo, hi := int64(sb.LogOffset), int64(sb.LogOffset+sb.LogBytes)
	spec := CreateSpec{Level: -1, Force: true, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != paths[3] {
			return d, err
		}
		return offFailDev{Device: d, fail: func(off int64) bool { return off >= lo && off < hi }}, nil
	}}
	f, err := Open(paths, spec, false)
	if err == nil {
		f.Close()
		return // not refused: member 3 failed instead, as a replay write failure
	}
	refusal := err
	d, err := openFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := make([]byte, len(ent))
	if err := d.ReadAt(got, int64(sb.LogOffset)+splitEntryOff); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ent) {
		t.Fatalf("the forced assembly was refused (%v), yet it had emptied member 2's write-hole log area (the other half's entry is gone)", refusal)
	}
}

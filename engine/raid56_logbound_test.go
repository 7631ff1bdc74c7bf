package engine

import "testing"

// A header's checkpoint is the first number the run after recovery gives
// an entry (recoverParityLog: logNext = checkpoint), unless it is past
// ParityLogRenumberAt (then the areas are emptied and the run numbers
// from 1, when every role is present). A run from any number up to
// there, for 2^62 numbers on, must write entries and checkpoints that
// decode: a recovery skipping them as corrupt would leave the write hole
// silently open for every write of that run.
func TestCheckpointBoundNumbersDecodableEntries(t *testing.T) {
	b := make([]byte, ParityLogHeaderSize)
	h := ParityLogHeader{Array: plogUUID, Checkpoint: ParityLogRenumberAt + 1<<62 - 1}
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeParityLogHeader(b, plogUUID); err != nil {
		t.Fatalf("the run's last checkpoint refused: %v", err)
	}
	got := ParityLogHeader{Checkpoint: ParityLogRenumberAt}
	g5 := ParityGeometry{Level: Level5, Members: 3, Layout: RightAsymmetric, ChunkSectors: 8, MemberSectors: 16}
	for _, seq := range []uint64{got.Checkpoint, got.Checkpoint + 1<<62 - 1} {
		e := ParityLogEntry{Array: plogUUID, Seq: seq, Stripe: 1, RowLo: 0, RowHi: 8, Logged: 2, Written: 3, Parity: 1, P: make([]byte, 4096)}
		buf := make([]byte, ParityLogEntrySize(8, 1))
		if _, err := e.Encode(buf, g5); err != nil {
			t.Fatalf("entry %d refused by Encode (then the run's writes fail): %v", seq, err)
		}
		if _, err := DecodeParityLogEntry(buf, g5, plogUUID); err != nil {
			t.Fatalf("header checkpoint %d accepted, the run's entry number %d encodes, but decoding it fails: %v", got.Checkpoint, e.Seq, err)
		}
	}
}

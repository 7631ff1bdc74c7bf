package engine

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseSuperblock feeds arbitrary blocks and member sizes to the
// superblock parser and its device bounds (the seed corpus, valid
// encodings and crafted invalid ones, is in testdata/fuzz). Properties:
// nothing panics; every error is classified (no superblock or corrupt); a
// parsed superblock passes its own validation, re-encodes to the very
// bytes it came from and parses back to the same value; and one accepted
// for a member of memberBytes lies within it.
//
// Run it with
//
//	go test ./engine -run '^$' -fuzz FuzzParseSuperblock -fuzztime 60s -fuzzminimizetime 2s
//
// (minimizing each new input for the default 60 s would take a whole short
// run); keep any crasher's input in testdata/fuzz/FuzzParseSuperblock.
func FuzzParseSuperblock(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, memberBytes uint64) {
		sb, err := ParseSuperblock(b)
		if err != nil {
			if sb != nil {
				t.Fatalf("ParseSuperblock returned a superblock with error %v", err)
			}
			if len(b) >= SuperblockSize && !errors.Is(err, ErrNoSuperblock) && !errors.Is(err, ErrCorruptSuperblock) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if err := sb.Validate(); err != nil {
			t.Fatalf("parsed superblock fails Validate: %v", err)
		}
		enc, err := sb.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed superblock does not marshal: %v", err)
		}
		if !bytes.Equal(enc, b[:SuperblockSize]) {
			t.Fatalf("re-encoding differs from the parsed block")
		}
		again, err := ParseSuperblock(enc)
		if err != nil || *again != *sb {
			t.Fatalf("re-encoded superblock parses to %+v, %v; want %+v", again, err, sb)
		}
		if sb.Events > MaxEvents || sb.BitmapBytes > MaxBitmapBytes {
			t.Fatalf("accepted events %d, bitmap area %d bytes", sb.Events, sb.BitmapBytes)
		}

		err = sb.CheckMemberSize(memberBytes)
		if err != nil {
			if !errors.Is(err, ErrCorruptSuperblock) {
				t.Fatalf("CheckMemberSize error does not wrap ErrCorruptSuperblock: %v", err)
			}
			return
		}
		// Everything the superblock points at is on the member, in order:
		// superblock, bitmap, data.
		if memberBytes < SuperblockOffset+SuperblockSize {
			t.Fatalf("accepted on a member of %d bytes", memberBytes)
		}
		if sb.BitmapBytes != 0 && (sb.BitmapOffset < SuperblockOffset+SuperblockSize || sb.BitmapOffset+sb.BitmapBytes > sb.DataOffset) {
			t.Fatalf("bitmap area at %d, %d bytes, outside [8192, %d)", sb.BitmapOffset, sb.BitmapBytes, sb.DataOffset)
		}
		if sb.DataOffset >= memberBytes || sb.DataSectors > (memberBytes-sb.DataOffset)/sbSector {
			t.Fatalf("data at %d, %d sectors, past the end of a member of %d bytes", sb.DataOffset, sb.DataSectors, memberBytes)
		}
	})
}

package engine

import (
	"errors"
	"fmt"
	"testing"
)

// shadowDisk is a member's first bytes in memory, read as ReadSuperblock
// reads a member.
type shadowDisk []byte

func (d shadowDisk) read(off int64, n int) ([]byte, error) {
	if off < 0 || off+int64(n) > int64(len(d)) {
		return nil, fmt.Errorf("read of %d bytes at %d past the end (%d)", n, off, len(d))
	}
	return append([]byte(nil), d[off:off+int64(n)]...), nil
}

// put writes a superblock block as writeSB does: shadow, then primary.
func (d shadowDisk) put(t *testing.T, b []byte) {
	t.Helper()
	off, ok := ShadowOffsetOf(b)
	if !ok {
		t.Fatal("no shadow slot")
	}
	copy(d[off:], b)
	copy(d[SuperblockOffset:], b)
}

func TestShadowOffset(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name   string
		edit   func(*Superblock)
		want   uint64
		wantOK bool
	}{
		{"below the data", func(*Superblock) {}, 2*MiB - 4096, true},
		{"below the log", func(sb *Superblock) {
			sb.Level, sb.Layout, sb.LogOffset, sb.LogBytes = 5, 2, 2*MiB-MinLogBytes, MinLogBytes
		}, 2*MiB - MinLogBytes - 4096, true},
		{"bitmap up to the data", func(sb *Superblock) { sb.BitmapBytes = 2*MiB - 8192 }, 0, false},
		{"bitmap up to the slot", func(sb *Superblock) { sb.BitmapBytes = 2*MiB - 8192 - 4096 }, 2*MiB - 4096, true},
		{"no room above the superblock", func(sb *Superblock) { sb.DataOffset, sb.BitmapBytes, sb.BitmapOffset = 8192, 0, 0 }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := sbFixture()
			tc.edit(sb)
			got, ok := sb.ShadowOffset()
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ShadowOffset() = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
			if b, err := sb.MarshalBinary(); err == nil {
				if g, k := ShadowOffsetOf(b); g != got || k != ok {
					t.Fatalf("ShadowOffsetOf = %d, %v; ShadowOffset %d, %v", g, k, got, ok)
				}
			}
		})
	}
}

// TestReadSuperblockTorn: a power cut tearing the primary's write (some of
// its 512-byte sectors new, the others old) leaves the shadow, written and
// flushed before it, holding the update: it is read instead, whichever
// sectors the tear kept.
func TestReadSuperblockTorn(t *testing.T) {
	old := sbFixture()
	for i := 5; i < 12; i++ {
		old.Roles[i] = RoleEntry{State: RoleSpare, Member: sbUUID(byte(0x10 + i))}
	}
	upd := *old
	upd.Events++
	upd.Roles[11] = RoleEntry{} // a spare removed: a change past the first sector
	upd.Clean = false
	ob, nb := mustMarshal(t, old), mustMarshal(t, &upd)
	for _, firstNew := range []bool{true, false} {
		t.Run(fmt.Sprintf("first sector new %v", firstNew), func(t *testing.T) {
			d := make(shadowDisk, old.DataOffset)
			d.put(t, ob)
			copy(d[mustShadow(t, nb):], nb) // the update's shadow write, flushed
			torn := append([]byte(nil), ob...)
			if firstNew {
				copy(torn[:512], nb[:512])
			} else {
				copy(torn[512:], nb[512:])
			}
			copy(d[SuperblockOffset:], torn)
			if _, err := ParseSuperblock(torn); !errors.Is(err, ErrBadChecksum) {
				t.Fatalf("the torn primary parses: %v", err)
			}
			sb, shadow, err := ReadSuperblock(d.read, int64(len(d)))
			if err != nil || !shadow {
				t.Fatalf("ReadSuperblock: %v (shadow %v), want the shadow", err, shadow)
			}
			if *sb != upd {
				t.Fatalf("read %+v, want the update %+v", sb, upd)
			}
		})
	}
	t.Run("shadow torn", func(t *testing.T) {
		// The cut tore the shadow's write: the primary, untouched, is read.
		d := make(shadowDisk, old.DataOffset)
		d.put(t, ob)
		copy(d[mustShadow(t, nb):], nb[:512])
		sb, shadow, err := ReadSuperblock(d.read, int64(len(d)))
		if err != nil || shadow || *sb != *old {
			t.Fatalf("ReadSuperblock: %+v, shadow %v, %v; want the primary", sb, shadow, err)
		}
	})
}

func mustShadow(t *testing.T, b []byte) uint64 {
	t.Helper()
	off, ok := ShadowOffsetOf(b)
	if !ok {
		t.Fatal("no shadow slot")
	}
	return off
}

// TestReadSuperblockShadowNotTaken: the shadow stands in only for a torn
// primary of the same member of the same array, lying where its own
// fields place it.
func TestReadSuperblockShadowNotTaken(t *testing.T) {
	sb := sbFixture()
	b := mustMarshal(t, sb)
	other := *sb
	other.MemberUUID = sbUUID(0xa0)
	other.Role = 0
	for _, tc := range []struct {
		name    string
		primary func([]byte) []byte
		shadow  []byte
		want    error
	}{
		{"wiped primary", func([]byte) []byte { return make([]byte, SuperblockSize) }, b, ErrNoSuperblock},
		{"primary corrupt with a valid checksum", func(p []byte) []byte {
			p = append([]byte(nil), p...)
			p[offReserved2] = 1
			seal(p)
			return p
		}, b, ErrCorruptSuperblock},
		{"shadow of another member", tornOf, mustMarshal(t, &other), ErrBadChecksum},
		{"shadow torn too", tornOf, tornOf(b), ErrBadChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := make(shadowDisk, sb.DataOffset)
			copy(d[mustShadow(t, b):], tc.shadow)
			copy(d[SuperblockOffset:], tc.primary(b))
			got, shadow, err := ReadSuperblock(d.read, int64(len(d)))
			if !errors.Is(err, tc.want) || got != nil || shadow {
				t.Fatalf("ReadSuperblock: %+v, shadow %v, %v; want %v", got, shadow, err, tc.want)
			}
		})
	}
	t.Run("shadow elsewhere", func(t *testing.T) {
		// A valid block of this member in the slot, but one whose own
		// layout puts its shadow elsewhere: not the update's shadow.
		moved := *sb
		moved.DataOffset += 1 << 20
		d := make(shadowDisk, moved.DataOffset)
		copy(d[mustShadow(t, b):], mustMarshal(t, &moved))
		copy(d[SuperblockOffset:], tornOf(b))
		if got, _, err := ReadSuperblock(d.read, int64(len(d))); !errors.Is(err, ErrBadChecksum) {
			t.Fatalf("ReadSuperblock: %+v, %v; want the primary's checksum error", got, err)
		}
	})
}

// tornOf is b with a sector of its role table changed, as a tear leaves it.
func tornOf(b []byte) []byte {
	t := append([]byte(nil), b...)
	t[offRoles+10*roleEntrySize] ^= 0xff
	return t
}

// TestReadSuperblockShadowPastEnd: a damaged primary whose layout fields
// put the shadow past the device's end has no shadow: it is corrupt, not
// a device that cannot be read.
func TestReadSuperblockShadowPastEnd(t *testing.T) {
	sb := sbFixture()
	sb.DataOffset = 1 << 40
	b := mustMarshal(t, sb)
	d := make(shadowDisk, 4<<20)
	copy(d[SuperblockOffset:], tornOf(b))
	if got, _, err := ReadSuperblock(d.read, int64(len(d))); !errors.Is(err, ErrCorruptSuperblock) || got != nil {
		t.Fatalf("ReadSuperblock: %+v, %v; want the primary's corrupt error", got, err)
	}
}

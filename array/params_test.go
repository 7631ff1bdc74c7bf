package array

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The device always has a volatile cache (as md): a member with a
// write-back cache put in later (replace, spare) must receive FLUSH, and
// the parameters cannot change while the device lives. It used to follow
// the members of the day only.
func TestParamsAlwaysVolatileCache(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, m := range a.Members {
		m.VolatileCache = false // disks without a write-back cache
	}
	if p := a.Params(); p.Basic.Attrs&ublk.AttrVolatileCache == 0 || p.Basic.Attrs&ublk.AttrFUA == 0 {
		t.Fatalf("attrs %#x: no volatile cache advertised, so a later member with one never gets FLUSH", p.Basic.Attrs)
	}
}

// Discard and write-zeroes are advertised only when every member and
// spare can do them: a spare on tmpfs (no ZERO_RANGE) takes write-zeroes
// away.
func TestParamsWriteZeroesOverMembersAndSpares(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	paths := memberFiles(t, 2, 16<<20)
	if err := unix.Statfs(paths[0], &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs")
	}
	spareDir, err := os.MkdirTemp("/dev/shm", "params")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(spareDir) })
	spare := filepath.Join(spareDir, "spare")
	if err := os.WriteFile(spare, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(spare, 16<<20); err != nil {
		t.Fatal(err)
	}
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Members[0].WriteZeroes {
		t.Skip("the test directory's filesystem cannot zero ranges")
	}
	if p := a.Params(); p.Discard.MaxWriteZeroesSectors == 0 || p.Discard.MaxDiscardSectors == 0 {
		t.Fatalf("members that can do both: %+v", p.Discard)
	}
	if err := a.AddSpare(spare); err != nil {
		t.Fatal(err)
	}
	p := a.Params()
	if p.Discard.MaxWriteZeroesSectors != 0 {
		t.Fatalf("write-zeroes advertised with a spare on tmpfs: %+v", p.Discard)
	}
	if p.Discard.MaxDiscardSectors == 0 {
		t.Fatalf("discard not advertised though tmpfs punches holes: %+v", p.Discard)
	}
}

// A raid0/1/10 device is zero copy where the kernel offers it: member I/O
// moves the request's own pages with O_DIRECT, which a member refuses
// (EINVAL, failing the member) unless the user's buffer was aligned to
// its logical block. The driver's default lets user buffers be 4-byte
// aligned, so the device asks for the members' alignment.
func TestParamsDMAAlignment(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := a.Params()
	want := uint32(max(a.Members[0].LogicalBlock, 512) - 1)
	if p.Types&ublk.ParamTypeDMAAlign == 0 || p.DMA.Alignment != want {
		t.Fatalf("types %#x dma alignment %d; want the DMA_ALIGN type, %d", p.Types, p.DMA.Alignment, want)
	}
}

// run --recover -n N re-attaches device N to the members given: a device
// larger than the array, or with smaller logical blocks than its members,
// is another array's and is refused before it is touched (the daemon
// checked the size; run --recover did not). A smaller one is a grow not
// yet applied to the device.
func TestArrayCheckDevice(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var _ ublk.DeviceChecker = a
	own := a.Params()
	if err := a.CheckDevice(own); err != nil {
		t.Fatalf("its own parameters: %v", err)
	}
	smaller := own
	smaller.Basic.DevSectors -= 8
	if err := a.CheckDevice(smaller); err != nil {
		t.Fatalf("a device smaller than the array (a grow): %v", err)
	}
	larger := own
	larger.Basic.DevSectors += 8
	if err := a.CheckDevice(larger); err == nil {
		t.Error("a device larger than the array accepted")
	}
	if own.Basic.LogicalBSShift > 9 {
		small := own
		small.Basic.LogicalBSShift = 9
		if err := a.CheckDevice(small); err == nil {
			t.Error("a device of smaller logical blocks than the members accepted")
		}
	}
}

// Found by review. A discard or write-zeroes is planned as one member
// operation per chunk piece and copy; the device advertises no request
// whose plan would have more than the executor tells apart (it used to
// advertise 1 GiB whatever the chunk: with 4 KiB chunks that request
// never completed).
func TestParamsDiscardPlanBounded(t *testing.T) {
	for _, c := range []struct {
		level  engine.Level
		layout engine.Layout
	}{{engine.Level0, engine.Layout{}}, {engine.Level10, engine.LayoutN2}} {
		a, err := Open(memberFiles(t, 2, 16<<20), CreateSpec{Level: c.level, Layout: c.layout, ChunkSectors: 8}, true)
		if err != nil {
			t.Fatal(err)
		}
		p := a.Params()
		a.Close()
		most := a.Engine.Geo.MaxPlanSectors()
		if most >= 1<<21 {
			t.Fatalf("%v: MaxPlanSectors %d: the test no longer covers a bound below 1 GiB", c.level, most)
		}
		for name, v := range map[string]uint32{"discard": p.Discard.MaxDiscardSectors, "write-zeroes": p.Discard.MaxWriteZeroesSectors} {
			if uint64(v) > most {
				t.Errorf("%v, 4 KiB chunks: %s of up to %d sectors advertised; plans stay within %d", c.level, name, v, most)
			}
		}
	}
}

package memdev

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func TestCacheFlushKillPowerCut(t *testing.T) {
	r := NewRack(rand.New(rand.NewPCG(1, 2)))
	d := r.AddDisk("/d0", 1<<20)
	v, err := r.Open("/d0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("/d0"); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second open: %v, want EBUSY", err)
	}
	if err := v.WriteAt(fill(1, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteAt(fill(2, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteAtDurable(fill(3, 512), 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := v.ReadAt(got, 4096); err != nil || !bytes.Equal(got, fill(2, 4096)) {
		t.Fatalf("read of a cached write: %v", err)
	}
	// kill -9: the cache stays.
	r.Kill()
	if err := v.ReadAt(got, 0); !errors.Is(err, ErrKilled) {
		t.Fatalf("a killed process's device answered %v", err)
	}
	if !bytes.Equal(r.Current(d, 4096, 4096), fill(2, 4096)) {
		t.Fatal("kill dropped the cache")
	}
	r.PowerCut()
	if !bytes.Equal(r.Stable(d, 0, 4096), fill(1, 4096)) || !bytes.Equal(r.Stable(d, 8192, 512), fill(3, 512)) {
		t.Fatal("flushed or FUA data lost in a power cut")
	}
	// The unflushed write: each sector old or new.
	after := r.Current(d, 4096, 4096)
	for s := 0; s < 8; s++ {
		if b := after[s*512]; b != 0 && b != 2 || !bytes.Equal(after[s*512:s*512+512], fill(b, 512)) {
			t.Fatalf("sector %d after the power cut holds neither value", s)
		}
	}
}

func TestCutAfterTearsAWrite(t *testing.T) {
	torn := false
	for seed := uint64(0); seed < 20 && !torn; seed++ {
		r := NewRack(rand.New(rand.NewPCG(seed, 7)))
		d := r.AddDisk("/d0", 1<<20)
		v, _ := r.Open("/d0")
		r.CutAfter(1)
		if err := v.WriteAt(fill(9, 4096), 0); !errors.Is(err, ErrKilled) {
			t.Fatalf("write at the power cut: %v", err)
		}
		got := r.Current(d, 0, 4096)
		n := bytes.Count(got, []byte{9})
		if n%512 != 0 {
			t.Fatalf("torn inside a sector: %d bytes", n)
		}
		torn = n > 0 && n < 4096
	}
	if !torn {
		t.Fatal("no seed tore the write")
	}
}

func TestFaultsAndHang(t *testing.T) {
	r := NewRack(rand.New(rand.NewPCG(1, 2)))
	d := r.AddDisk("/d0", 1<<20)
	v, _ := r.Open("/d0")
	r.SetFaults(d, Fault{Ops: OpWrite, Off: 4096, Len: 4096, Err: unix.EIO})
	if err := v.WriteAt(fill(1, 512), 4096+512); !errors.Is(err, unix.EIO) {
		t.Fatalf("write in a faulty range: %v", err)
	}
	if err := v.WriteAt(fill(1, 512), 0); err != nil {
		t.Fatalf("write outside the faulty range: %v", err)
	}
	r.Unsupported(d)
	if err := v.Discard(0, 4096); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("discard: %v", err)
	}
	r.Hang(d)
	done := make(chan error)
	go func() { done <- v.Flush() }()
	r.Release(d)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.Hang(d)
	go func() { done <- v.Flush() }()
	r.Kill()
	if err := <-done; !errors.Is(err, ErrKilled) {
		t.Fatalf("hung flush of a killed process: %v", err)
	}
}

// An Opener belongs to the process current when it was made: after that
// process ends it opens nothing, while the next process's opens work.
func TestOpenerOfDeadProcess(t *testing.T) {
	r := NewRack(rand.New(rand.NewPCG(1, 2)))
	r.AddDisk("/d0", 1<<20)
	r.AddDisk("/d1", 1<<20)
	open := r.Opener()
	if _, err := open("/d0"); err != nil {
		t.Fatal(err)
	}
	r.PowerCut()
	if _, err := open("/d1"); !errors.Is(err, ErrKilled) {
		t.Fatalf("open by a process the power cut ended: %v, want ErrKilled", err)
	}
	v, err := r.Opener()("/d1")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteAt(fill(1, 512), 0); err != nil {
		t.Fatalf("write by the next process: %v", err)
	}
}

// A disk grown in place: open devices see the new size, the added space
// holds its leftovers until written, the old contents stay.
func TestGrowLeftovers(t *testing.T) {
	r := NewRack(rand.New(rand.NewPCG(1, 2)))
	d := r.AddDisk("/d0", 1<<20)
	v, err := r.Open("/d0")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteAtDurable(fill(1, 4096), 1<<20-4096); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteAt(fill(2, 512), 1<<20); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("write past the end: %v", err)
	}
	r.Grow(d, 3<<20, func(off int64, p []byte) {
		for i := range p {
			p[i] = byte((off+int64(i))>>20) + 0x80
		}
	})
	if n, _ := v.CurrentSize(); n != 3<<20 {
		t.Fatalf("size after grow %d", n)
	}
	if !bytes.Equal(r.Stable(d, 1<<20-4096, 4096), fill(1, 4096)) {
		t.Fatal("grow changed the old contents")
	}
	if got := r.Current(d, 2<<20, 4096); !bytes.Equal(got, fill(0x82, 4096)) {
		t.Fatalf("leftovers %x...", got[:8])
	}
	if err := v.WriteAt(fill(3, 512), 1<<20+512); err != nil {
		t.Fatal(err)
	}
	r.PowerCut()
	got := r.Current(d, 1<<20, 4096)
	if want := fill(0x81, 512); !bytes.Equal(got[:512], want) || !bytes.Equal(got[1024:], fill(0x81, 3072)) {
		t.Fatal("leftovers around a written sector changed")
	}
	if b := got[512]; b != 3 && b != 0x81 {
		t.Fatalf("the written sector holds %x", b)
	}
}

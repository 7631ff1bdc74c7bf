package ublk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VMCommand runs the tests that need a real ublk kernel.
const VMCommand = "scripts/test-vm.sh"

// needKernel skips on machines without ublk_drv, naming the command that
// runs these tests in the project's VM, and fails when that command runs
// them (UBLK_RAID_VM=1), so the VM run can never pass by skipping.
func needKernel(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ControlPath); err != nil {
		if os.Getenv("UBLK_RAID_VM") == "1" {
			t.Fatalf("running in the test VM but %s is missing: %v", ControlPath, err)
		}
		t.Skipf("needs the ublk_drv kernel module; run %s (boots the project's VM)", VMCommand)
	}
}

// vmControl is the preamble of every VM test: the kernel, one scratch disk
// and the control device (closed when the test ends).
func vmControl(t *testing.T) (string, *Control) {
	t.Helper()
	needKernel(t)
	disk := testDisks(t, 1)[0]
	ctrl, err := OpenControl()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	return disk, ctrl
}

// testDisks returns the scratch disks the VM command provides.
func testDisks(t *testing.T, n int) []string {
	t.Helper()
	disks := strings.Fields(os.Getenv("UBLK_RAID_TEST_DISKS"))
	if len(disks) < n {
		if os.Getenv("UBLK_RAID_VM") == "1" {
			t.Fatalf("UBLK_RAID_TEST_DISKS lists %d disks, this test needs %d", len(disks), n)
		}
		t.Skipf("needs %d scratch disks in UBLK_RAID_TEST_DISKS; run %s", n, VMCommand)
	}
	return disks[:n]
}

func createPassthrough(t *testing.T, ctrl *Control, disk string, queues int) (*Device, *Member) {
	return createPassthroughCfg(t, ctrl, disk, Config{ID: -1, Queues: queues})
}

func createPassthroughCfg(t *testing.T, ctrl *Control, disk string, cfg Config) (*Device, *Member) {
	t.Helper()
	m, err := OpenMember(disk)
	if err != nil {
		t.Fatal(err)
	}
	tgt := NewPassthrough(m)
	cfg.Params = tgt.Params()
	d, err := Create(ctrl, tgt, cfg)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return d, m
}

func alignedBuf(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func TestVMPassthroughDataPath(t *testing.T) {
	disk, ctrl := vmControl(t)
	for _, cfg := range []Config{{Queues: 1}, {Queues: 2}, {Queues: 4}, {Queues: 2, PollFor: 200 * time.Microsecond},
		{Queues: 2, NoZeroCopy: true}} {
		queues := cfg.Queues
		name := fmt.Sprintf("queues=%d", queues)
		if cfg.PollFor > 0 {
			name += fmt.Sprintf(",poll=%v", cfg.PollFor)
		}
		if cfg.NoZeroCopy {
			name += ",no-zero-copy"
		}
		cfg.ID = -1
		t.Run(name, func(t *testing.T) { passthroughDataPath(t, ctrl, disk, cfg) })
	}
}

// TestVMPassthroughBatchIO is the data path test on devices served with
// UBLK_F_BATCH_IO (7.0+), zero copy and copy path, and with a queue so
// shallow that the fetch's tag buffers and the commit arrays are reused
// all the time. Where the driver lacks the feature, Create must refuse.
func TestVMPassthroughBatchIO(t *testing.T) {
	disk, ctrl := vmControl(t)
	feats, err := ctrl.Features()
	if err != nil {
		t.Fatal(err)
	}
	if feats&FlagBatchIO == 0 {
		m, err := OpenMember(disk)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		tgt := NewPassthrough(m)
		if d, err := Create(ctrl, tgt, Config{ID: -1, Queues: 1, BatchIO: true, Params: tgt.Params()}); !errors.Is(err, ErrNoBatchIO) {
			if d != nil {
				d.Delete()
			}
			t.Fatalf("Create with BatchIO on a driver without it: %v, want ErrNoBatchIO", err)
		}
		t.Skip("the ublk driver lacks UBLK_F_BATCH_IO (Linux 7.0+)")
	}
	for _, cfg := range []Config{{Queues: 2, BatchIO: true}, {Queues: 1, Depth: 4, BatchIO: true},
		{Queues: 2, BatchIO: true, NoZeroCopy: true}, {Queues: 1, Depth: 4, BatchIO: true, NoZeroCopy: true}} {
		name := fmt.Sprintf("queues=%d", cfg.Queues)
		if cfg.Depth > 0 {
			name += fmt.Sprintf(",depth=%d", cfg.Depth)
		}
		if cfg.NoZeroCopy {
			name += ",no-zero-copy"
		}
		cfg.ID = -1
		t.Run(name, func(t *testing.T) { passthroughDataPath(t, ctrl, disk, cfg) })
	}
}

// passthroughDataPath writes, reads, zeroes and discards through a
// passthrough device made with cfg and checks what the device and the
// member hold.
func passthroughDataPath(t *testing.T, ctrl *Control, disk string, cfg Config) {
	queues := cfg.Queues
	d, m := createPassthroughCfg(t, ctrl, disk, cfg)
	defer m.Close()
	if batch := d.Info().Flags&FlagBatchIO != 0; batch != cfg.BatchIO {
		d.Delete()
		t.Fatalf("batch_io on the device: %v; asked: %v", batch, cfg.BatchIO)
	}
	if got := int(d.Info().NrHwQueues); got != queues {
		d.Delete()
		t.Fatalf("asked for %d queues, the kernel made %d (it caps them at the CPU count: boot the VM with enough CPUs)", queues, got)
	}
	// Zero copy wherever the driver offers it, unless refused.
	offered := d.DriverFeatures()&FlagAutoBufReg != 0
	if zc := d.Info().Flags&FlagAutoBufReg != 0; zc != (offered && !cfg.NoZeroCopy) {
		d.Delete()
		t.Fatalf("auto_buf_reg on the device: %v; the driver offers it: %v; NoZeroCopy: %v", zc, offered, cfg.NoZeroCopy)
	}
	// O_DSYNC: every write carries FUA, so the FUA path is exercised too.
	fd, err := unix.Open(d.BlockPath(), unix.O_RDWR|unix.O_DIRECT|unix.O_DSYNC, 0)
	if err != nil {
		d.Delete()
		t.Fatal(err)
	}
	const chunk, chunks = 256 << 10, 32
	want := alignedBuf(t, chunk*chunks)
	rng := rand.New(rand.NewPCG(uint64(queues), 7))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	// Concurrent writers so several queues and tags are in use.
	var wg sync.WaitGroup
	errs := make(chan error, chunks)
	for i := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, err := unix.Pwrite(fd, want[i*chunk:(i+1)*chunk], int64(i*chunk)*3); err != nil || n != chunk {
				errs <- fmt.Errorf("pwrite chunk %d: n=%d err=%v", i, n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := unix.Fsync(fd); err != nil { // FLUSH
		t.Errorf("fsync (FLUSH): %v", err)
	}
	got := alignedBuf(t, chunk*chunks)
	for i := range chunks {
		if n, err := unix.Pread(fd, got[i*chunk:(i+1)*chunk], int64(i*chunk)*3); err != nil || n != chunk {
			t.Fatalf("pread chunk %d: n=%d err=%v", i, n, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Error("data read through the device differs from what was written")
	}
	// WRITE_ZEROES (BLKZEROOUT) over chunk 1's range.
	rng2 := [2]uint64{uint64(chunk) * 3, chunk}
	if err := ioctlPtr(fd, unix.BLKZEROOUT, unsafe.Pointer(&rng2)); err != nil {
		t.Errorf("BLKZEROOUT: %v", err)
	}
	zero := alignedBuf(t, chunk)
	if _, err := unix.Pread(fd, zero, int64(chunk)*3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(zero, make([]byte, chunk)) {
		t.Error("range is not zero after BLKZEROOUT")
	}
	copy(want[chunk:2*chunk], make([]byte, chunk))
	// DISCARD (BLKDISCARD) over chunk 1's range, forwarded to the
	// member when it can discard; the contents after it are unspecified.
	if m.Discard {
		if err := ioctlPtr(fd, unix.BLKDISCARD, unsafe.Pointer(&rng2)); err != nil {
			t.Errorf("BLKDISCARD: %v", err)
		}
		copy(want[chunk:2*chunk], make([]byte, chunk))
		if _, err := unix.Pwrite(fd, want[chunk:2*chunk], int64(chunk)*3); err != nil {
			t.Fatal(err)
		}
	} else if os.Getenv("UBLK_RAID_VM") == "1" {
		t.Errorf("%s cannot discard in the VM (qemu disks have discard=unmap)", disk)
	}
	unix.Close(fd)
	if err := d.Delete(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// The member holds exactly what the device was given.
	for i := range chunks {
		if _, err := unix.Pread(m.Fd(), got[i*chunk:(i+1)*chunk], int64(i*chunk)*3); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Error("member contents differ from what was written through the device")
	}
	assertNoUblkDevices(t)
}

func assertNoUblkDevices(t *testing.T) {
	t.Helper()
	// Nodes vanish asynchronously after DEL_DEV returns.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := filepath.Glob("/dev/ublkb*")
		c, _ := filepath.Glob("/dev/ublkc*")
		if len(b)+len(c) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ublk device nodes left behind: %v %v", b, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// tasksInD lists tasks in uninterruptible sleep.
func tasksInD() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'D' {
			out = append(out, strings.TrimSpace(s[:i+1]))
		}
	}
	return out
}

// ublkIOErrors returns the kernel log's I/O error lines about ublk block
// devices (dmesg: the test VM runs as root).
func ublkIOErrors(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	var errs []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "dev ublkb") && (strings.Contains(l, "I/O error") || strings.Contains(l, "unable to read")) {
			errs = append(errs, l)
		}
	}
	return errs
}

// TestVMCreateDeleteCycles creates and deletes devices back to back: no
// descriptor, task or kernel I/O error may be left behind (a partition
// scan still reading when the device stops is one source of those).
func TestVMCreateDeleteCycles(t *testing.T) {
	disk, ctrl := vmControl(t)
	ioErrs := len(ublkIOErrors(t))
	// Warm up once so lazily created runtime fds (epoll, etc.) are counted.
	d, m := createPassthrough(t, ctrl, disk, 2)
	if err := d.Delete(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	fds := openFDs(t)
	for i := range 20 {
		d, m := createPassthrough(t, ctrl, disk, 1+i%4)
		f, err := os.OpenFile(d.BlockPath(), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("cycle %d: open %s: %v", i, d.BlockPath(), err)
		}
		if _, err := f.ReadAt(make([]byte, 4096), 0); err != nil {
			t.Fatalf("cycle %d: read: %v", i, err)
		}
		f.Close()
		if err := d.Delete(); err != nil {
			t.Fatalf("cycle %d: delete: %v", i, err)
		}
		m.Close()
	}
	assertNoUblkDevices(t)
	if errs := ublkIOErrors(t); len(errs) > ioErrs {
		t.Errorf("kernel log: I/O errors on ublk devices during the cycles:\n%s", strings.Join(errs[ioErrs:], "\n"))
	}
	if got := openFDs(t); got != fds {
		t.Errorf("open fds: %d before the cycles, %d after", fds, got)
	}
	// A task stuck on a deleted device stays in D; one passing through D
	// (the test runner's shell reading the 9p root) does not: only tasks
	// in D in every sample over a second count.
	stuck := tasksInD()
	for i := 0; i < 10 && len(stuck) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
		now := tasksInD()
		stuck = slices.DeleteFunc(stuck, func(s string) bool { return !slices.Contains(now, s) })
	}
	if len(stuck) > 0 {
		t.Errorf("tasks in D state after the cycles: %v", stuck)
	}
	runtime.GC()
}

func TestVMBadMembers(t *testing.T) {
	needKernel(t)
	disk := testDisks(t, 1)[0]
	before := make([]byte, 1<<20)
	readHead := func() []byte {
		f, err := os.Open(disk)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1<<20)
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	copy(before, readHead())

	if _, err := OpenMember("/dev/does-not-exist"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing member: err = %v", err)
	}
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMember(small); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("64 KiB member: err = %v", err)
	}
	holder, err := unix.Open(disk, unix.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenMember(disk)
	unix.Close(holder)
	if err == nil || !strings.Contains(err.Error(), "in use") || !errors.Is(err, unix.EBUSY) {
		t.Errorf("member held exclusively: err = %v", err)
	}
	if !bytes.Equal(before, readHead()) {
		t.Error("a refused member was written to")
	}
}

// TestVMQueueAffinity checks the kernel's CPU maps of the queues (with a
// queue per CPU they are disjoint and cover every CPU) and that each queue
// thread runs, by default, on every CPU but its queue's: serving a request
// never competes with its submitter. (GET_QUEUE_AFFINITY reads the queue
// from data[0]; with the queue only in queue_id every thread was placed by
// queue 0's map.)
func TestVMQueueAffinity(t *testing.T) {
	disk, ctrl := vmControl(t)
	n := min(runtime.NumCPU(), MaxDefaultQueues)
	d, m := createPassthrough(t, ctrl, disk, n)
	defer m.Close()
	defer d.Delete()
	var seen unix.CPUSet
	for q := range n {
		set, err := ctrl.QueueAffinity(d.ID(), uint16(q))
		if err != nil {
			t.Fatal(err)
		}
		if set.Count() == 0 {
			t.Fatalf("queue %d: empty affinity", q)
		}
		for c := range len(set) * 64 {
			if set.IsSet(c) && seen.IsSet(c) {
				t.Errorf("CPU %d is mapped to queue %d and an earlier queue", c, q)
			}
			if set.IsSet(c) {
				seen.Set(c)
			}
		}
		// The default (CPUsOthers): any CPU but the queue's.
		got := d.affinity[q]
		if runtime.NumCPU() > set.Count() {
			if got == nil {
				t.Errorf("queue %d: thread not pinned, want the CPUs other than %v", q, cpuList(&set))
				continue
			}
			for _, c := range cpuList(got) {
				if set.IsSet(c) {
					t.Errorf("queue %d: thread may run on CPU %d, which the kernel maps to it (%v)", q, c, cpuList(&set))
				}
			}
			if got.Count()+set.Count() != runtime.NumCPU() {
				t.Errorf("queue %d: thread on CPUs %v, want every CPU but %v", q, cpuList(got), cpuList(&set))
			}
		} else if got != nil {
			t.Errorf("queue %d: thread pinned to %v with no other CPU to go to", q, cpuList(got))
		}
	}
	if seen.Count() != runtime.NumCPU() {
		t.Errorf("queues' affinities cover %d CPUs, the machine has %d", seen.Count(), runtime.NumCPU())
	}
}

func cpuList(set *unix.CPUSet) []int {
	var l []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			l = append(l, c)
		}
	}
	return l
}

func TestVMScheduler(t *testing.T) {
	disk, ctrl := vmControl(t)
	sched := func(d *Device) string {
		b, err := os.ReadFile(fmt.Sprintf("/sys/block/ublkb%d/queue/scheduler", d.ID()))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	d, m := createPassthroughCfg(t, ctrl, disk, Config{ID: -1, Queues: 1, Scheduler: "none"})
	got := sched(d)
	d.Delete()
	m.Close()
	if !strings.Contains(got, "[none]") {
		t.Errorf("Scheduler none: queue/scheduler reads %q", got)
	}

	// A scheduler the kernel does not have: Create fails and leaves no
	// device behind.
	before, _ := filepath.Glob("/dev/ublkc*")
	m, err := OpenMember(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tgt := NewPassthrough(m)
	if d, err := Create(ctrl, tgt, Config{ID: -1, Queues: 1, Params: tgt.Params(), Scheduler: "no-such-elevator"}); err == nil {
		d.Delete()
		t.Fatal("Create with an unknown scheduler succeeded")
	} else if !strings.Contains(err.Error(), "no-such-elevator") {
		t.Errorf("error does not name the scheduler: %v", err)
	}
	if after, _ := filepath.Glob("/dev/ublkc*"); len(after) != len(before) {
		t.Errorf("ublk char devices %v before, %v after the failed Create", before, after)
	}
}

// TestVMPartitionsScanned: a device's partitions exist when Create returns,
// on drivers that scan them during START_DEV and on those whose scan Create
// runs itself (FlagNoAutoPartScan); and the device reports the features it
// uses.
func TestVMPartitionsScanned(t *testing.T) {
	disk, ctrl := vmControl(t)
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	orig := make([]byte, 512)
	if _, err := f.ReadAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.WriteAt(orig, 0)
		f.Sync()
	})
	// An MBR with one Linux partition: sectors 2048..4095.
	mbr := make([]byte, 512)
	e := mbr[446:462]
	e[4] = 0x83
	binary.LittleEndian.PutUint32(e[8:], 2048)
	binary.LittleEndian.PutUint32(e[12:], 2048)
	mbr[510], mbr[511] = 0x55, 0xaa
	if _, err := f.WriteAt(mbr, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	feats, err := ctrl.Features()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver features: %v", FlagNames(feats))
	for i := range 3 {
		d, m := createPassthrough(t, ctrl, disk, 1)
		name := filepath.Base(d.BlockPath())
		_, err := os.Stat(fmt.Sprintf("/sys/block/%s/%sp1", name, name))
		flags := d.Info().Flags
		if i == 0 {
			t.Logf("device flags: %v", FlagNames(flags))
		}
		if derr := d.Delete(); derr != nil {
			t.Fatal(derr)
		}
		m.Close()
		if err != nil {
			t.Fatalf("round %d: partition 1 of %s missing when Create returned: %v", i, name, err)
		}
		if want := flagsRequiredByThisDaemon | feats&flagsUsedWherePresent; flags&want != want {
			t.Fatalf("device flags %v lack %v", FlagNames(flags), FlagNames(want&^flags))
		}
		if flags&^feats != 0 {
			t.Fatalf("device flags %v include %v, which the driver does not offer", FlagNames(flags), FlagNames(flags&^feats))
		}
	}
}

// TestVMStopUnused: where the driver has UBLK_F_SAFE_STOP_DEV, StopUnused
// refuses while the block device is open (a plain open: what an exclusive-
// open check cannot see) and leaves it serving; once closed it stops. On
// older drivers it says so and changes nothing.
func TestVMStopUnused(t *testing.T) {
	disk, ctrl := vmControl(t)
	d, m := createPassthrough(t, ctrl, disk, 1)
	defer m.Close()
	defer d.Delete()
	if d.Info().Flags&FlagSafeStopDev == 0 {
		if err := d.StopUnused(); !errors.Is(err, ErrNoSafeStop) {
			t.Fatalf("StopUnused without SAFE_STOP_DEV: %v, want ErrNoSafeStop", err)
		}
	} else {
		f, err := os.Open(d.BlockPath())
		if err != nil {
			t.Fatal(err)
		}
		if err := d.StopUnused(); !errors.Is(err, ErrInUse) {
			f.Close()
			t.Fatalf("StopUnused while open: %v, want ErrInUse", err)
		}
		if _, err := f.ReadAt(make([]byte, 4096), 0); err != nil {
			t.Fatalf("read after the refused stop: %v", err)
		}
		f.Close()
		if err := d.StopUnused(); err != nil {
			t.Fatalf("StopUnused once closed: %v", err)
		}
		select {
		case <-d.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("queues still running after StopUnused")
		}
		if _, err := os.Stat(d.BlockPath()); err == nil {
			t.Fatalf("%s still exists after StopUnused", d.BlockPath())
		}
	}
	if err := d.Delete(); err != nil {
		t.Fatal(err)
	}
	assertNoUblkDevices(t)
}

// TestVMBatchIORecover detaches from a batch device as a dying server
// would and re-attaches with Recover: the new queues prepare their tags
// and fetch again (the kernel leaves the queues canceled until every tag
// is prepared), and data written before and after the hand-over reads
// back. Recover follows the device: it is asked without BatchIO.
func TestVMBatchIORecover(t *testing.T) {
	disk, ctrl := vmControl(t)
	feats, err := ctrl.Features()
	if err != nil {
		t.Fatal(err)
	}
	if feats&FlagBatchIO == 0 {
		t.Skip("the ublk driver lacks UBLK_F_BATCH_IO (Linux 7.0+)")
	}
	d, m := createPassthroughCfg(t, ctrl, disk, Config{ID: -1, Queues: 2, BatchIO: true})
	defer m.Close()
	id := d.ID()
	const n = 1 << 20
	want := alignedBuf(t, n)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	rw := func(write bool, buf []byte, off int64) {
		t.Helper()
		fd, err := unix.Open(fmt.Sprintf("/dev/ublkb%d", id), unix.O_RDWR|unix.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		var k int
		if write {
			k, err = unix.Pwrite(fd, buf, off)
		} else {
			k, err = unix.Pread(fd, buf, off)
		}
		if err != nil || k != len(buf) {
			t.Fatalf("write=%v at %d: n=%d err=%v", write, off, k, err)
		}
	}
	rw(true, want, 0)
	if err := d.Detach(10 * time.Second); err != nil {
		d.Delete()
		t.Fatalf("detach: %v", err)
	}
	d2, err := Recover(ctrl, id, NewPassthrough(m), Config{})
	if err != nil {
		ctrl.DelDev(id)
		t.Fatalf("recover: %v", err)
	}
	defer func() {
		if err := d2.Delete(); err != nil {
			t.Errorf("delete: %v", err)
		}
		assertNoUblkDevices(t)
	}()
	if d2.Info().Flags&FlagBatchIO == 0 {
		t.Fatal("the recovered device has no batch_io flag")
	}
	got := alignedBuf(t, n)
	rw(false, got, 0)
	if !bytes.Equal(got, want) {
		t.Fatal("data written before the hand-over differs after it")
	}
	for i := range want {
		want[i] ^= 0x5a
	}
	rw(true, want, n)
	rw(false, got, n)
	if !bytes.Equal(got, want) {
		t.Fatal("data written after the hand-over differs")
	}
}

// failingQueueCount is a passthrough target whose start fails before any
// queue starts (as a raid5/6 array's may, SetQueueCount allocating its log
// rings).
type failingQueueCount struct{ *Passthrough }

func (failingQueueCount) SetQueueCount(int) error { return errors.New("injected start failure") }

// failingLastQueue is a passthrough target whose last queue fails to
// start, after the others started and fetched.
type failingLastQueue struct {
	*Passthrough
	queues int
}

func (f failingLastQueue) NewQueue(q *Queue) (QueueHandler, error) {
	if q.ID() == f.queues-1 {
		return nil, errors.New("injected queue start failure")
	}
	return f.Passthrough.NewQueue(q)
}

var errRecoverFailed = errors.New("recover failed")

// recoverErr is errRecoverFailed for a failed Recover; nil (and the
// device left to the test's cleanup) for one that succeeded.
func recoverErr(_ *Device, err error) error {
	if err != nil {
		return errRecoverFailed
	}
	return nil
}

// A recovery that fails (the new target cannot start) must leave the
// device quiesced, its data and its users' pending requests kept, for
// another recovery, where the driver allows one (stopping it would fail
// the I/O of a filesystem mounted on it); where it does not (6.12), the
// device must be stopped, not left hanging its users.
func TestVMFailedRecoverKeepsDevice(t *testing.T) {
	disk, ctrl := vmControl(t)
	d, m := createPassthroughCfg(t, ctrl, disk, Config{ID: -1, Queues: 2})
	defer m.Close()
	id := d.ID()
	const n = 64 << 10
	want := alignedBuf(t, n)
	for i := range want {
		want[i] = byte(i*13 + i>>9)
	}
	dev := fmt.Sprintf("/dev/ublkb%d", id)
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		d.Delete()
		t.Fatal(err)
	}
	if k, err := unix.Pwrite(fd, want, 0); err != nil || k != n {
		d.Delete()
		t.Fatalf("write: %d %v", k, err)
	}
	if err := d.Detach(10 * time.Second); err != nil {
		d.Delete()
		t.Fatalf("detach: %v", err)
	}
	got := alignedBuf(t, n)
	read := make(chan error, 1)
	pread := func() {
		k, err := unix.Pread(fd, got, 0)
		if err == nil && k != n {
			err = fmt.Errorf("read %d bytes", k)
		}
		read <- err
	}
	// The character device's node gone (its open fails after the
	// recovery began): removed for one attempt, then made again.
	char := fmt.Sprintf("/dev/ublkc%d", id)
	var st unix.Stat_t
	if err := unix.Stat(char, &st); err != nil {
		d.Delete()
		t.Fatal(err)
	}
	noChar := func() error {
		if err := os.Remove(char); err != nil {
			return err
		}
		defer unix.Mknod(char, unix.S_IFCHR|0o600, int(st.Rdev))
		_, err := Recover(ctrl, id, NewPassthrough(m), Config{})
		if err == nil {
			return nil
		}
		return errRecoverFailed
	}
	attempts := []struct {
		what string
		try  func() error
	}{
		{"no character device node", noChar},
		{"the queue count refused", func() error { return recoverErr(Recover(ctrl, id, failingQueueCount{NewPassthrough(m)}, Config{})) }},
		{"a queue that cannot start", func() error { return recoverErr(Recover(ctrl, id, failingLastQueue{NewPassthrough(m), 2}, Config{})) }},
	}
	for _, bad := range attempts {
		if err := bad.try(); !errors.Is(err, errRecoverFailed) {
			ctrl.DelDev(id)
			t.Fatalf("recover with %s: %v, want it to fail", bad.what, err)
		}
		info, err := ctrl.DevInfo(id)
		if err != nil {
			t.Fatalf("after the failed recovery (%s): %v", bad.what, err)
		}
		if info.State == StateDead {
			// The driver cannot start a recovery again: stopped, a read
			// fails rather than hangs.
			t.Logf("the driver refuses another recovery: the device was stopped")
			go pread()
			select {
			case err := <-read:
				if err == nil {
					t.Error("a read of the stopped device succeeded")
				}
			case <-time.After(30 * time.Second):
				t.Error("a read of the stopped device hangs")
			}
			unix.Close(fd)
			if err := ctrl.DelDev(id); err != nil {
				t.Errorf("delete: %v", err)
			}
			return
		}
	}
	// A read issued while nobody serves waits, and is served by the next
	// recovery.
	go pread()
	d2, err := Recover(ctrl, id, NewPassthrough(m), Config{})
	if err != nil {
		ctrl.DelDev(id)
		t.Fatalf("recover after the failed ones: %v", err)
	}
	defer func() {
		unix.Close(fd)
		if err := d2.Delete(); err != nil {
			t.Errorf("delete: %v", err)
		}
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read across the failed recovery: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read waiting across the recoveries never completed")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after the failed and the good recovery")
	}
}

// faultyRingTarget is a passthrough whose queue 0's io_uring_enter fails
// with EFAULT once fault is set (a ring failing under a serving queue).
type faultyRingTarget struct {
	*Passthrough
	fault *atomic.Bool
	q0    chan *Queue
}

func (f faultyRingTarget) NewQueue(q *Queue) (QueueHandler, error) {
	if q.ID() == 0 {
		q.SetEnterFault(f.fault, unix.EFAULT)
		f.q0 <- q
	}
	return f.Passthrough.NewQueue(q)
}

// A queue that fails while serving must not leave the device hanging
// with the character device open (nothing could recover it: every
// request on that queue, and with the driver quiescing the disk every
// other one, waited for good). Every queue leaves, the character device
// is released, the device waits for a recovery with its users' requests,
// and a recovery serves them with the data intact.
func TestVMQueueFailureLeavesDeviceForRecovery(t *testing.T) {
	disk, ctrl := vmControl(t)
	m, err := OpenMember(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fault := new(atomic.Bool)
	tgt := faultyRingTarget{NewPassthrough(m), fault, make(chan *Queue, 1)}
	d, err := Create(ctrl, tgt, Config{ID: -1, Queues: 2, Params: tgt.Params()})
	if err != nil {
		t.Fatal(err)
	}
	id := d.ID()
	q0 := <-tgt.q0
	const n = 64 << 10
	want := alignedBuf(t, n)
	for i := range want {
		want[i] = byte(i*29 + i>>10)
	}
	fd, err := unix.Open(d.BlockPath(), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		d.Delete()
		t.Fatal(err)
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	if k, err := unix.Pwrite(fd, want, 0); err != nil || k != n {
		d.Delete()
		t.Fatalf("write: %d %v", k, err)
	}
	fault.Store(true)
	q0.Wake()
	select {
	case <-d.Done():
	case <-time.After(30 * time.Second):
		ctrl.DelDev(id)
		t.Fatal("queue 0 failed, yet the other queue kept the device (still serving after 30 s)")
	}
	if !d.Failed() || d.Err() == nil {
		ctrl.DelDev(id)
		t.Fatalf("failed %v, queues' error %v: want the failure reported", d.Failed(), d.Err())
	}
	t.Logf("queues ended: %v", d.Err())
	if err := d.Detach(10 * time.Second); err != nil {
		ctrl.DelDev(id)
		t.Fatalf("the device is not left for recovery: %v", err)
	}
	got := alignedBuf(t, n)
	read := make(chan error, 1)
	go func() {
		k, err := unix.Pread(fd, got, 0)
		if err == nil && k != n {
			err = fmt.Errorf("read %d bytes", k)
		}
		read <- err
	}()
	select {
	case err := <-read:
		ctrl.DelDev(id)
		t.Fatalf("a read of the device awaiting recovery returned (%v): want it to wait", err)
	case <-time.After(time.Second):
	}
	d2, err := Recover(ctrl, id, NewPassthrough(m), Config{})
	if err != nil {
		ctrl.DelDev(id)
		t.Fatalf("recover: %v", err)
	}
	defer func() {
		unix.Close(fd) // (DEL_DEV waits for the block device's openers)
		fd = -1
		if err := d2.Delete(); err != nil {
			t.Errorf("delete: %v", err)
		}
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read across the recovery: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read waiting for the recovery never completed")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after the recovery")
	}
}

package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// faultyArray is an array target whose queue 0's io_uring_enter fails
// (EFAULT) once fault is set.
type faultyArray struct {
	*array.Array
	fault *atomic.Bool
	q0    chan *ublk.Queue
}

func (f faultyArray) NewQueue(q *ublk.Queue) (ublk.QueueHandler, error) {
	if q.ID() == 0 {
		q.SetEnterFault(f.fault, unix.EFAULT)
		f.q0 <- q
	}
	return f.Array.NewQueue(q)
}

// An array whose queue fails while it serves is recovered by the daemon,
// as after a crash of the daemon: a read waiting on the device meanwhile
// completes with the data, and the array serves again at the same number,
// in the state file throughout. It used to be left with its other queues
// running and the character device open: nothing could recover it, and
// the device's users waited for good.
func TestVMQueueFailureRecovers(t *testing.T) {
	if os.Getenv("UBLK_RAID_VM") != "1" {
		t.Skip("needs the ublk driver: run scripts/test-vm.sh")
	}
	ctrl, err := ublk.OpenControl()
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	paths := files(t, 2, 64<<20)
	fault := new(atomic.Bool)
	q0 := make(chan *ublk.Queue, 1)
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	createDevice = func(c *ublk.Control, tgt ublk.Target, cfg ublk.Config) (*ublk.Device, error) {
		return saved(c, faultyArray{tgt.(*array.Array), fault, q0}, cfg)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(ctrl, ManagerOptions{StateFile: state, Log: zaptest.NewLogger(t)})
	defer m.Shutdown(false)
	v, err := m.Add(context.Background(), AddRequest{Members: paths, Level: "1", Queues: 2, AssumeClean: true})
	if err != nil {
		t.Fatal(err)
	}
	n := v.Number
	s, err := m.get(n)
	if err != nil {
		t.Fatal(err)
	}
	q := <-q0
	const size = 256 << 10
	want, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] = byte(i*31 + i>>11)
	}
	fd, err := unix.Open(DevicePath(n), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if k, err := unix.Pwrite(fd, want, 0); err != nil || k != size {
		t.Fatalf("write: %d %v", k, err)
	}
	fault.Store(true)
	q.Wake()
	select {
	case <-s.d.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("queue 0 failed, yet the device's queues still run after 30 s")
	}
	read := make(chan error, 1)
	go func() {
		k, err := unix.Pread(fd, got, 0)
		if err == nil && k != size {
			err = fmt.Errorf("read %d bytes", k)
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read across the recovery: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a read of the failed device was not served within 60 s: not recovered")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after the recovery")
	}
	// (The device serves from within the retry, which then tracks it.)
	var s2 *served
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s2, err = m.get(n); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("after the recovery: %v", err)
	}
	if s2 == s || !s2.recovered {
		t.Fatalf("%s is not served by a recovered device", DevicePath(n))
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].Number != n {
		t.Fatalf("state file after the recovery: %+v", st)
	}
	// And it goes on serving.
	for i := range want {
		want[i] ^= 0xa5
	}
	if k, err := unix.Pwrite(fd, want, size); err != nil || k != size {
		t.Fatalf("write after the recovery: %d %v", k, err)
	}
	if k, err := unix.Pread(fd, got, size); err != nil || k != size || !bytes.Equal(got, want) {
		t.Fatalf("read after the recovery: %d %v (equal %v)", k, err, bytes.Equal(got, want))
	}
}

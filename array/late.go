package array

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lateKey identifies a device (a block device by its number, a file by
// its inode), whichever descriptor or path reaches it.
// A device without a descriptor is its own key.
type lateKey struct {
	dev, ino, rdev uint64
	d              Device
}

// lateIO counts member operations given up after the member timeout that
// have not returned, per device: until they have, a late write may still
// land on the device, so no rebuild onto it starts (re-adding the failed
// device would have the late write undo the rebuild).
type lateIO struct {
	mu sync.Mutex
	n  map[lateKey]int
}

var late lateIO // devices are shared by every array of the process

// keyOf is m's device key: the one taken when it was opened, if any.
func keyOf(m *Member) (lateKey, bool) {
	if m == nil {
		return lateKey{}, false
	}
	if m.keyOK {
		return m.key, true
	}
	return deviceKey(m)
}

// deviceKey is the key of the device m's descriptor reaches.
func deviceKey(m *Member) (lateKey, bool) {
	if m.Fd() < 0 {
		return lateKey{d: m.Device}, true
	}
	var st unix.Stat_t
	if err := unix.Fstat(m.Fd(), &st); err != nil {
		return lateKey{}, false
	}
	if m.BlockDevice {
		return lateKey{rdev: uint64(st.Rdev)}, true
	}
	return lateKey{dev: uint64(st.Dev), ino: st.Ino}, true
}

// lateBegin records a given-up operation on m and returns its device key
// for lateEnd.
func lateBegin(m *Member) lateKey {
	k, ok := keyOf(m)
	if !ok {
		return lateKey{}
	}
	late.mu.Lock()
	if late.n == nil {
		late.n = map[lateKey]int{}
	}
	late.n[k]++
	late.mu.Unlock()
	return k
}

// lateEnd records that a given-up operation returned.
func lateEnd(k lateKey) {
	if k == (lateKey{}) {
		return
	}
	late.mu.Lock()
	if late.n[k]--; late.n[k] <= 0 {
		delete(late.n, k)
	}
	late.mu.Unlock()
}

// lateOn reports whether given-up operations on m's device are still out.
func lateOn(m *Member) bool {
	k, ok := keyOf(m)
	if !ok {
		return false
	}
	late.mu.Lock()
	defer late.mu.Unlock()
	return late.n[k] > 0
}

// lateWait is how often a rebuild waiting for late I/O looks again.
const lateWait = 20 * time.Millisecond

// waitLate waits until no given-up operation is out on the devices of
// roles (a rebuild's targets), or ctx ends. (addMember and addSpares
// refuse a device with such I/O out; this stays as the rebuild's own
// guard.)
func (a *Array) waitLate(ctx context.Context, roles []int) error {
	for {
		busy := false
		for _, r := range roles {
			busy = busy || lateOn(a.currentMember(r))
		}
		if !busy {
			return nil
		}
		t := time.NewTimer(lateWait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

package daemon

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Found by review (fx4). `fail PATH` of a path that is no member now opens
// PATH to read a superblock from it (FormerRoleOf, added by 53c3e88),
// with the array's operation lock held. A path that blocks on open (here
// a FIFO; a dead disk's node does the same) hangs the request, and every
// later management request of the array waits behind it. Before 53c3e88
// fail answered "not a member" at once (only stat is used to resolve a
// path). The test sees the daemon blocked in the open deterministically:
// a non-blocking open of the FIFO for writing succeeds only while a
// reader is in it.
func TestReviewfx4FailOfFIFOPathDoesNotBlock(t *testing.T) {
	m, _, _ := servedMirror(t, 8<<20)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	type res struct {
		code int
		msg  string
	}
	done := make(chan res, 1)
	go func() {
		code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": fifo})
		done <- res{code, msg}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case r := <-done:
			t.Logf("fail %s: %d %q", fifo, r.code, r.msg)
			if r.code == http.StatusOK {
				t.Fatalf("fail of a FIFO that is no member answered 200")
			}
			return
		default:
		}
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			// A reader is in the FIFO: the daemon opened it and waits
			// for a writer. Let it go, then report.
			unix.Close(fd)
			r := <-done
			t.Fatalf("fail %s (not a member): the daemon opened the path and blocked in it with the array's operation lock held, until this test opened the FIFO for writing (then: %d %q); a device whose open hangs hangs every management request of the array", fifo, r.code, r.msg)
		}
		if time.Now().After(deadline) {
			t.Fatal("neither answered nor blocked in the FIFO after 60s")
		}
		time.Sleep(time.Millisecond)
	}
}

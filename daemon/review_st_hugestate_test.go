package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Found by review (st). LoadState reads the state file with os.ReadFile:
// whole, without a bound, whatever it is. A state file path naming no
// regular file of a sane size (`serve --state-file /dev/zero`, a disk's
// node given by mistake, a pipe, a file grown huge) is read into memory
// to its end before anything is checked: /dev/zero never ends (the daemon
// grows until the OOM killer ends it, after it took the control socket,
// and systemd restarts it into the same), a disk is read whole. A state
// file the daemon writes is a few KiB per array: a bounded read (or one
// of regular files only) refuses the rest at once.
//
// Here the state file is a FIFO fed with 256 MiB of JSON white space
// (standing for /dev/zero, which would never end): LoadState must refuse
// it without reading it all.
func TestReviewstLoadStateBoundsItsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arrays.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	const total = 256 << 20
	written, opened := make(chan int64, 1), make(chan struct{}, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // (waits for the reader)
		opened <- struct{}{}
		if err != nil {
			written <- -1
			return
		}
		defer f.Close()
		chunk := bytes.Repeat([]byte(" "), 1<<20)
		var n int64
		for n < total {
			k, err := f.Write(chunk)
			n += int64(k)
			if err != nil {
				break // EPIPE: the reader stopped
			}
		}
		written <- n
	}()
	_, err := LoadState(path)
	// A LoadState that refused without opening the FIFO leaves the writer
	// waiting for a reader: open the read side, and close it once the
	// writer is in (its next write then fails, EPIPE).
	r, oerr := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if oerr != nil {
		t.Fatal(oerr)
	}
	<-opened
	r.Close()
	n := <-written
	t.Logf("LoadState: %v; the writer got %d bytes in", err, n)
	if err == nil {
		t.Fatal("LoadState accepted 256 MiB of white space from a pipe")
	}
	if n >= total {
		t.Errorf("LoadState read all %d MiB of the pipe given as the state file before refusing it (%v): a state file path naming /dev/zero or a disk is read without bound", total>>20, err)
	}
}

package main

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// A recovery right after its server died may find a member still held by
// the dead server's rings (EBUSY until the kernel releases them): it
// retries; anything else, or a fresh start, fails at once.
func TestBusyRetry(t *testing.T) {
	busyTwice := func(calls *int) func() (int, error) {
		return func() (int, error) {
			*calls++
			if *calls <= 2 {
				return 0, fmt.Errorf("member in use: %w", unix.EBUSY)
			}
			return 7, nil
		}
	}
	var calls int
	if v, err := busyRetry(true, busyTwice(&calls)); err != nil || v != 7 || calls != 3 {
		t.Fatalf("recovery: %d, %v after %d calls; want 7 after 3", v, err, calls)
	}
	calls = 0
	if _, err := busyRetry(false, busyTwice(&calls)); !errors.Is(err, unix.EBUSY) || calls != 1 {
		t.Fatalf("not a recovery: %v after %d calls; want EBUSY after 1", err, calls)
	}
	calls = 0
	if _, err := busyRetry(true, func() (int, error) { calls++; return 0, unix.ENOENT }); !errors.Is(err, unix.ENOENT) || calls != 1 {
		t.Fatalf("recovery, ENOENT: %v after %d calls; want ENOENT after 1", err, calls)
	}
}

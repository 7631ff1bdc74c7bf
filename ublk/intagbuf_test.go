package ublk

import "testing"

// InTagBuf tells a request's own data (any part of its Buf) from a
// target's buffers, including ones right before or after it and empty
// slices.
func TestInTagBuf(t *testing.T) {
	mem := make([]byte, 3*4096)
	q := &Queue{reqs: make([]Request, 2)}
	q.reqs[1].Buf = mem[4096 : 2*4096]
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"all of it", mem[4096 : 2*4096], true},
		{"the first sector", mem[4096 : 4096+512], true},
		{"the last sector", mem[2*4096-512 : 2*4096], true},
		{"inside", mem[5000:6000], true},
		{"before", mem[0:4096], false},
		{"straddling the start", mem[4096-512 : 4096+512], false},
		{"straddling the end", mem[2*4096-512 : 2*4096+512], false},
		{"after", mem[2*4096 : 3*4096], false},
		{"elsewhere", make([]byte, 512), false},
		{"empty", mem[4096:4096], false},
		{"longer than it, from its start", mem[4096 : 3*4096], false},
	} {
		if got := q.InTagBuf(1, tc.data); got != tc.want {
			t.Errorf("%s: InTagBuf = %v, want %v", tc.name, got, tc.want)
		}
	}
	if q.InTagBuf(0, mem[4096:4096+512]) {
		t.Error("a tag without a buffer holds data")
	}
}

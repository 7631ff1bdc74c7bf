//go:build linux

package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mdParityCase is one raid5/raid6 array to create with mdadm.
type mdParityCase struct {
	level    Level
	layout   ParityLayout
	members  int
	chunkKiB int
}

func (c mdParityCase) String() string {
	return fmt.Sprintf("%s_%s_x%d_%dK", c.level, c.layout, c.members, c.chunkKiB)
}

// TestVMParityLayoutMatchesKernelMD proves ParityGeometry and Parity
// against the real md raid456 driver, both ways:
//
//   - md to us: md writes a stamp naming the array sector into every sector
//     of the array; on the stopped members each stamp is where LocateData
//     puts it, and every stripe's P (and Q) bytes are what Parity computes
//     from its data chunks in StripeMap.Slot order. md's level, layout
//     number, component size, array size and optimal I/O size are ours.
//   - us to md: the member images are built here (stamps where LocateData
//     puts them, P and Q from Parity) under the superblocks mdadm wrote; md
//     assembles them and reads every stamp back where it should be, its
//     check finds no parity mismatch (mismatch_cnt 0), and with one member
//     failed (two for raid6) it rebuilds every sector from our parity.
//
// Cases: raid5 in md's four layouts and raid6 left-symmetric and
// right-asymmetric, 4 and 5 members, 64 KiB and 512 KiB chunks.
func TestVMParityLayoutMatchesKernelMD(t *testing.T) {
	needMD(t)
	var cases []mdParityCase
	for _, members := range []int{4, 5} {
		for _, chunk := range []int{64, 512} {
			for l := range ParityLayout(len(parityLayoutNames)) {
				cases = append(cases, mdParityCase{Level5, l, members, chunk})
			}
			for _, l := range []ParityLayout{LeftSymmetric, RightAsymmetric} {
				cases = append(cases, mdParityCase{Level6, l, members, chunk})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { checkMDParity(t, c) })
	}
}

// mdParityFileKiB is each member's backing file: 4 MiB plus 5 chunks of
// 64 KiB, so the data area is not a whole number of 512 KiB chunks.
const mdParityFileKiB = 4*1024 + 320

// mdParityArray is an md array on loop devices over files in a test's
// directory.
type mdParityArray struct {
	t       *testing.T
	c       mdParityCase
	files   []string
	loops   []string
	dev, md string
	up      bool
}

func newMDParityArray(t *testing.T, c mdParityCase) *mdParityArray {
	dir := t.TempDir()
	a := &mdParityArray{t: t, c: c, files: make([]string, c.members)}
	for i := range a.files {
		a.files[i] = filepath.Join(dir, fmt.Sprintf("member%d.img", i))
		if err := os.WriteFile(a.files[i], nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// Zeroes: the parity of zeroes is zeroes, so --assume-clean is
		// true and md's read-modify-writes keep the parity right.
		if err := os.Truncate(a.files[i], mdParityFileKiB*1024); err != nil {
			t.Fatal(err)
		}
	}
	a.md = freeMD(t)
	a.dev = "/dev/" + a.md
	t.Cleanup(a.down)
	return a
}

func (a *mdParityArray) attach() {
	a.loops = make([]string, len(a.files))
	for i, f := range a.files {
		a.loops[i] = runTool(a.t, "losetup", "--find", "--show", f)
	}
}

func (a *mdParityArray) create() {
	a.attach()
	args := []string{"--create", a.dev, "--run", "--assume-clean", "--metadata=1.2", "--bitmap=none",
		"--level=" + strconv.Itoa(int(a.c.level)), "--layout=" + a.c.layout.String(),
		"--chunk=" + strconv.Itoa(a.c.chunkKiB), "--raid-devices=" + strconv.Itoa(a.c.members)}
	runTool(a.t, "mdadm", append(args, a.loops...)...)
	a.up = true
}

func (a *mdParityArray) assemble() {
	a.attach()
	runTool(a.t, "mdadm", append([]string{"--assemble", a.dev, "--run"}, a.loops...)...)
	a.up = true
}

// down stops the array and detaches the loop devices.
func (a *mdParityArray) down() {
	if a.up {
		a.up = false
		if out, err := exec.Command("mdadm", "--stop", a.dev).CombinedOutput(); err != nil {
			a.t.Errorf("mdadm --stop %s: %v\n%s", a.dev, err, out)
		}
	}
	for _, l := range a.loops {
		if out, err := exec.Command("losetup", "-d", l).CombinedOutput(); err != nil {
			a.t.Errorf("losetup -d %s: %v\n%s", l, err, out)
		}
	}
	a.loops = nil
}

// geometry reads md's view of the running array, checks it against ours
// and returns the geometry and each slot's backing file and data offset.
func (a *mdParityArray) geometry() (ParityGeometry, []string, []uint64) {
	t, c := a.t, a.c
	sys := "/sys/block/" + a.md
	if got := readSysfs(t, sys+"/md/level"); got != c.level.String() {
		t.Fatalf("md level %q, want %q", got, c.level)
	}
	if got := readSysfsUint(t, sys+"/md/layout"); got != uint64(c.layout) {
		t.Fatalf("md layout %d for %s, ParityLayout %d", got, c.layout, c.layout)
	}
	g := ParityGeometry{Level: c.level, Members: c.members, Layout: c.layout, ChunkSectors: uint64(c.chunkKiB) * 2}
	if got := readSysfsUint(t, sys+"/md/chunk_size"); got != g.ChunkSectors*512 {
		t.Fatalf("md chunk_size %d, want %d", got, g.ChunkSectors*512)
	}
	g.MemberSectors = readSysfsUint(t, sys+"/md/component_size") * 2
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	backing := make([]string, c.members)
	offsets := make([]uint64, c.members)
	for i, loop := range a.loops {
		rd := sys + "/md/dev-" + filepath.Base(loop)
		slot := readSysfsUint(t, rd+"/slot")
		if slot >= uint64(c.members) || backing[slot] != "" {
			t.Fatalf("%s: bad md slot %d", loop, slot)
		}
		backing[slot] = a.files[i]
		offsets[slot] = readSysfsUint(t, rd+"/offset")
	}
	if got, md := g.ArraySectors(), readSysfsUint(t, sys+"/size"); got != md {
		t.Fatalf("ArraySectors() = %d, md's array has %d sectors (component size %d)", got, md, g.MemberSectors)
	}
	if got, md := g.ChunkSectors*uint64(g.DataMembers())*512, readSysfsUint(t, sys+"/queue/optimal_io_size"); got != md {
		t.Errorf("full stripe %d bytes, md's optimal_io_size %d", got, md)
	}
	return g, backing, offsets
}

// stripeChunks returns stripe s's chunks of the member images: data in
// syndrome order, then P and Q.
func stripeChunks(g ParityGeometry, img [][]byte, offsets []uint64, s uint64) (data, parity [][]byte) {
	m := g.Stripe(s)
	chunk := g.ChunkSectors * 512
	at := func(member int) []byte {
		o := offsets[member]*512 + s*chunk
		return img[member][o : o+chunk]
	}
	data = make([][]byte, g.DataMembers())
	for mem := range g.Members {
		if sl := m.Slot[mem]; sl >= 0 {
			data[sl] = at(mem)
		}
	}
	parity = [][]byte{at(m.P)}
	if m.Q >= 0 {
		parity = append(parity, at(m.Q))
	}
	return data, parity
}

func checkMDParity(t *testing.T, c mdParityCase) {
	// md to us.
	a := newMDParityArray(t, c)
	a.create()
	g, backing, offsets := a.geometry()
	nonce := rand.Uint64()
	writeStamps(t, a.dev, g.ArraySectors(), nonce)
	a.down()
	img := make([][]byte, c.members)
	for m, f := range backing {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img[m] = b
	}
	bad := 0
	for s := range g.ArraySectors() {
		_, _, mem, ms := g.LocateData(s)
		p := (offsets[mem] + ms) * 512
		if got, ok := readStamp(img[mem][p:p+512], nonce); !ok || got != s {
			if bad++; bad <= 10 {
				t.Errorf("array sector %d: LocateData puts it on member %d sector %d, which holds %v (stamp %v)", s, mem, ms, got, ok)
			}
		}
	}
	par, err := NewParity(g.DataMembers(), c.level == Level6)
	if err != nil {
		t.Fatal(err)
	}
	chunk := int(g.ChunkSectors * 512)
	want := [][]byte{make([]byte, chunk), make([]byte, chunk)}[:par.Count()]
	for s := range g.Stripes() {
		data, parity := stripeChunks(g, img, offsets, s)
		if err := par.Compute(data, want); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !bytes.Equal(want[i], parity[i]) {
				if bad++; bad <= 10 {
					t.Errorf("stripe %d: md's %c differs from Parity's (member %d)", s, "PQ"[i], []int{g.Stripe(s).P, g.Stripe(s).Q}[i])
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d mismatches between md's members and ParityGeometry/Parity", bad)
	}

	// Us to md: our images under md's superblocks.
	b := newMDParityArray(t, c)
	b.create()
	_, backing, offsets = b.geometry()
	b.down()
	img = make([][]byte, c.members)
	for m, f := range backing {
		if img[m], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	nonce = rand.Uint64()
	for s := range g.ArraySectors() {
		_, _, mem, ms := g.LocateData(s)
		putStamp(img[mem][(offsets[mem]+ms)*512:], s, nonce)
	}
	for s := range g.Stripes() {
		data, parity := stripeChunks(g, img, offsets, s)
		if err := par.Compute(data, parity); err != nil {
			t.Fatal(err)
		}
	}
	for m, f := range backing {
		if err := os.WriteFile(f, img[m], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.assemble()
	checkStampsThroughMD(t, b.dev, g.ArraySectors(), nonce, "assembled from our images")
	sys := "/sys/block/" + b.md + "/md/"
	if err := os.WriteFile(sys+"sync_action", []byte("check"), 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Sleep(100 * time.Millisecond); readSysfs(t, sys+"sync_action") != "idle"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("md's check did not end in 3 minutes")
		}
	}
	if n := readSysfsUint(t, sys+"mismatch_cnt"); n != 0 {
		t.Errorf("md's check of our parity: mismatch_cnt %d, want 0", n)
	}
	// Degraded: md rebuilds every sector of the failed members from the
	// others and our parity.
	for m := range g.ParityMembers() {
		runTool(t, "mdadm", b.dev, "--fail", b.loops[m])
	}
	checkStampsThroughMD(t, b.dev, g.ArraySectors(), nonce, fmt.Sprintf("with %d member(s) failed", g.ParityMembers()))
}

// checkStampsThroughMD reads the array and checks that every sector holds
// its stamp.
func checkStampsThroughMD(t *testing.T, dev string, sectors, nonce uint64, what string) {
	t.Helper()
	// Drop anything cached from before: every read must reach md.
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const bufSize = 1 << 20
	buf, err := unix.Mmap(-1, 0, bufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	var bad []string
	for s := uint64(0); s < sectors; {
		n := min(sectors-s, bufSize/512)
		if _, err := f.ReadAt(buf[:n*512], int64(s*512)); err != nil {
			t.Fatalf("%s: read %s at sector %d: %v", what, dev, s, err)
		}
		for i := range n {
			if got, ok := readStamp(buf[i*512:(i+1)*512], nonce); !ok || got != s+i {
				if len(bad) < 10 {
					bad = append(bad, fmt.Sprintf("sector %d holds %d (stamp %v)", s+i, got, ok))
				} else {
					bad[9] = "..."
				}
			}
		}
		s += n
	}
	if len(bad) > 0 {
		t.Fatalf("%s: md reads other data than LocateData put: %s", what, strings.Join(bad, "; "))
	}
}

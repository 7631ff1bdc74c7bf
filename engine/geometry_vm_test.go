//go:build linux

package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// vmTestCommand runs the tests that need the real kernel.
const vmTestCommand = "scripts/test-vm.sh"

// needMD skips on machines without md (and mdadm, losetup, root), naming the
// command that runs these tests in the project's VM, and fails when that
// command runs them (UBLK_RAID_VM=1), so the VM run can never pass by
// skipping.
func needMD(t *testing.T) {
	t.Helper()
	missing := ""
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		missing = "the md driver (/proc/mdstat)"
	} else if os.Geteuid() != 0 {
		missing = "root"
	} else {
		for _, tool := range []string{"mdadm", "losetup"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = tool
				break
			}
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("UBLK_RAID_VM") == "1" {
		t.Fatalf("running in the test VM but %s is missing", missing)
	}
	t.Skipf("needs %s, mdadm, losetup and root; run %s (boots the project's VM)", missing, vmTestCommand)
}

// mdCase is one array to create with mdadm.
type mdCase struct {
	level    Level
	layout   string // raid10 only
	members  int
	chunkKiB int    // 0 for raid1
	fileKiB  uint64 // size of each member's backing file
}

func (c mdCase) String() string {
	s := fmt.Sprintf("%s_x%d", c.level, c.members)
	if c.layout != "" {
		s = fmt.Sprintf("%s_%s_x%d", c.level, c.layout, c.members)
	}
	if c.chunkKiB != 0 {
		s += fmt.Sprintf("_%dK", c.chunkKiB)
	}
	return s
}

// TestVMLayoutMatchesKernelMD creates md arrays with mdadm on loop devices,
// writes a stamp naming the array sector into every sector of the array, and
// checks on the raw members, after stopping the array, that every copy of
// every sector is exactly where Locate puts it (plus md's data offset), that
// nothing else carries a stamp, and that ArraySectors, the layout number and
// the optimal I/O size are md's.
func TestVMLayoutMatchesKernelMD(t *testing.T) {
	needMD(t)
	// Member files are 8 MiB plus 5 chunks of 64 KiB, so the data area is
	// not a multiple of 2 or 3 chunks and md's rounding shows.
	const file = 8*1024 + 320
	cases := []mdCase{
		{Level0, "", 4, 64, file},
		{Level0, "", 3, 4, file},
		{Level0, "", 2, 512, file},
		{Level1, "", 2, 0, file},
		{Level1, "", 4, 0, file},
		{Level10, "n2", 4, 64, file},
		{Level10, "f2", 4, 64, file},
		{Level10, "o2", 4, 64, file},
		{Level10, "n3", 4, 64, file},
		{Level10, "f3", 4, 64, file},
		{Level10, "o3", 4, 64, file},
		{Level10, "n2", 2, 64, file},
		{Level10, "f2", 2, 64, file},
		{Level10, "o2", 2, 64, file},
		{Level10, "n2", 3, 64, file},
		{Level10, "f2", 3, 64, file},
		{Level10, "o2", 3, 64, file},
		{Level10, "n3", 3, 64, file},
		{Level10, "f3", 3, 64, file},
		{Level10, "f2", 5, 32, file + 37},
		{Level10, "o3", 5, 128, file},
		{Level10, "n2", 5, 4, file},
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { checkMDLayout(t, c) })
	}
}

// stampMagic starts every stamped sector.
var stampMagic = [8]byte{'u', 'b', 'l', 'k', 'G', 'E', 'O', 0}

func putStamp(b []byte, s, nonce uint64) {
	copy(b, stampMagic[:])
	binary.LittleEndian.PutUint64(b[8:], s)
	binary.LittleEndian.PutUint64(b[16:], nonce)
	binary.LittleEndian.PutUint64(b[504:], ^s)
}

// readStamp returns the array sector a member sector is stamped with.
func readStamp(b []byte, nonce uint64) (uint64, bool) {
	if !bytes.Equal(b[:8], stampMagic[:]) || binary.LittleEndian.Uint64(b[16:]) != nonce {
		return 0, false
	}
	s := binary.LittleEndian.Uint64(b[8:])
	return s, binary.LittleEndian.Uint64(b[504:]) == ^s
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func readSysfs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func readSysfsUint(t *testing.T, path string) uint64 {
	t.Helper()
	s := readSysfs(t, path)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", path, s)
	}
	return v
}

// freeMD returns an md device name not in use.
func freeMD(t *testing.T) string {
	t.Helper()
	for n := 100; n < 1000; n++ {
		name := fmt.Sprintf("md%d", n)
		if _, err := os.Stat("/sys/block/" + name); os.IsNotExist(err) {
			if _, err := os.Stat("/dev/" + name); os.IsNotExist(err) {
				return name
			}
		}
	}
	t.Fatal("no free md device number")
	return ""
}

func checkMDLayout(t *testing.T, c mdCase) {
	dir := t.TempDir()
	files := make([]string, c.members)
	loops := make([]string, c.members)
	detached := make([]bool, c.members)
	for i := range files {
		files[i] = filepath.Join(dir, fmt.Sprintf("member%d.img", i))
		if err := os.WriteFile(files[i], nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(files[i], int64(c.fileKiB)*1024); err != nil {
			t.Fatal(err)
		}
		loops[i] = runTool(t, "losetup", "--find", "--show", files[i])
		t.Cleanup(func() {
			if detached[i] {
				return
			}
			if out, err := exec.Command("losetup", "-d", loops[i]).CombinedOutput(); err != nil {
				t.Errorf("losetup -d %s: %v\n%s", loops[i], err, out)
			}
		})
	}

	md := freeMD(t)
	dev := "/dev/" + md
	args := []string{"--create", dev, "--run", "--assume-clean", "--metadata=1.2",
		"--level=" + strconv.Itoa(int(c.level)), "--raid-devices=" + strconv.Itoa(c.members)}
	if c.level != Level0 {
		args = append(args, "--bitmap=none") // raid0 has none, and mdadm refuses the option
	}
	if c.layout != "" {
		args = append(args, "--layout="+c.layout)
	}
	if c.chunkKiB != 0 {
		args = append(args, "--chunk="+strconv.Itoa(c.chunkKiB))
	}
	runTool(t, "mdadm", append(args, loops...)...)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			runTool(t, "mdadm", "--stop", dev)
		}
	}
	t.Cleanup(func() {
		if !stopped {
			stopped = true
			if out, err := exec.Command("mdadm", "--stop", dev).CombinedOutput(); err != nil {
				t.Errorf("mdadm --stop %s: %v\n%s", dev, err, out)
			}
		}
	})

	// What md made of it.
	sys := "/sys/block/" + md
	if got := readSysfs(t, sys+"/md/level"); got != c.level.String() {
		t.Fatalf("md level %q, want %q", got, c.level)
	}
	if got := readSysfsUint(t, sys+"/md/raid_disks"); got != uint64(c.members) {
		t.Fatalf("md raid_disks %d, want %d", got, c.members)
	}
	g := Geometry{Level: c.level, Members: c.members, ChunkSectors: uint64(c.chunkKiB) * 2}
	if c.level == Level1 {
		g.ChunkSectors = 128 // unused by raid1's mapping
	} else if got := readSysfsUint(t, sys+"/md/chunk_size"); got != g.ChunkSectors*512 {
		t.Fatalf("md chunk_size %d, want %d", got, g.ChunkSectors*512)
	}
	if c.level == Level10 {
		l, err := ParseLayout(c.layout)
		if err != nil {
			t.Fatal(err)
		}
		g.Layout = l
		mdLayout := readSysfsUint(t, sys+"/md/layout")
		if uint32(mdLayout) != l.MD() {
			t.Fatalf("md layout %#x, Layout.MD() = %#x", mdLayout, l.MD())
		}
		if back, err := LayoutFromMD(uint32(mdLayout)); err != nil || back != l {
			t.Fatalf("LayoutFromMD(%#x) = %v, %v; want %v", mdLayout, back, err, l)
		}
	}
	// Members by md slot, with their data offsets and data sizes.
	offsets := make([]uint64, c.members)
	backing := make([]string, c.members)
	var rawData uint64 // smallest data area (rdev size)
	for i, loop := range loops {
		rd := sys + "/md/dev-" + filepath.Base(loop)
		slot := readSysfsUint(t, rd+"/slot")
		if slot >= uint64(c.members) || backing[slot] != "" {
			t.Fatalf("%s: bad md slot %d", loop, slot)
		}
		backing[slot] = files[i]
		offsets[slot] = readSysfsUint(t, rd+"/offset")
		if sz := readSysfsUint(t, rd+"/size") * 2; rawData == 0 || sz < rawData {
			rawData = sz
		}
	}
	g.MemberSectors = readSysfsUint(t, sys+"/md/component_size") * 2
	if g.MemberSectors == 0 { // raid0 keeps no component size: use the members'
		g.MemberSectors = rawData
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("%s: %v", g.name(), err)
	}
	mdSize := readSysfsUint(t, sys+"/size")
	// The same geometry given the whole data area, before mdadm's rounding
	// of the component size, must map the same.
	whole := g
	whole.MemberSectors = c.fileKiB*2 - offsets[0]
	t.Logf("%s: data offset %d, data area %d, md's rdev size %d, component size %d; md array size %d, ArraySectors %d (from the whole data area: %d); io_opt md %s, ours %d",
		g.name(), offsets[0], whole.MemberSectors, rawData, g.MemberSectors, mdSize, g.ArraySectors(), whole.ArraySectors(),
		readSysfs(t, sys+"/queue/optimal_io_size"), g.DataStripeSectors()*512)
	if got := g.ArraySectors(); got != mdSize {
		t.Errorf("ArraySectors() = %d, md's array has %d sectors", got, mdSize)
	}
	if got := whole.ArraySectors(); got != mdSize {
		t.Errorf("ArraySectors() from the whole data area = %d, md's array has %d sectors", got, mdSize)
	}
	if c.level != Level1 {
		if ioOpt := readSysfsUint(t, sys+"/queue/optimal_io_size"); ioOpt != g.DataStripeSectors()*512 {
			t.Errorf("DataStripeSectors() = %d sectors, md's optimal_io_size is %d bytes", g.DataStripeSectors(), ioOpt)
		}
	}

	// Stamp every sector of the array.
	nonce := rand.Uint64()
	writeStamps(t, dev, mdSize, nonce)
	stop()
	for i, l := range loops {
		runTool(t, "losetup", "-d", l)
		detached[i] = true
	}

	// Every copy of every sector is where Locate says.
	data := make([][]byte, c.members)
	for m, f := range backing {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data[m] = b
	}
	var buf, wbuf [MaxCopies]Location
	bad := 0
	for s := range mdSize {
		locs := g.Locate(s, buf[:])
		if w := whole.Locate(s, wbuf[:]); !equalLocs(w, locs) {
			if bad++; bad <= 10 {
				t.Errorf("array sector %d: Locate gives %v with md's component size, %v with the whole data area", s, locs, w)
			}
		}
		for i, l := range locs {
			p := (offsets[l.Member] + l.Sector) * 512
			var got string
			if p+512 > uint64(len(data[l.Member])) {
				got = "nothing: past the end of the member"
			} else if st, ok := readStamp(data[l.Member][p:p+512], nonce); !ok {
				got = "no stamp"
			} else if st != s {
				got = fmt.Sprintf("array sector %d", st)
			} else {
				continue
			}
			if bad++; bad <= 10 {
				t.Errorf("copy %d of array sector %d: member %d sector %d (data offset %d) holds %s", i, s, l.Member, l.Sector, offsets[l.Member], got)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d copies misplaced", bad)
	}
	// And no stamp is anywhere else.
	stamps := uint64(0)
	for _, b := range data {
		for p := 0; p+512 <= len(b); p += 512 {
			if _, ok := readStamp(b[p:p+512], nonce); ok {
				stamps++
			}
		}
	}
	if want := mdSize * uint64(g.Copies()); stamps != want {
		t.Fatalf("the members hold %d stamped sectors, want %d (%d sectors x %d copies)", stamps, want, mdSize, g.Copies())
	}
}

// writeStamps writes a stamp into every sector of dev with O_DIRECT.
func writeStamps(t *testing.T, dev string, sectors, nonce uint64) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY|unix.O_DIRECT, 0)
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
	for s := uint64(0); s < sectors; {
		n := min(sectors-s, bufSize/512)
		for i := range n {
			putStamp(buf[i*512:], s+i, nonce)
		}
		if _, err := f.WriteAt(buf[:n*512], int64(s*512)); err != nil {
			t.Fatalf("write %s at sector %d: %v", dev, s, err)
		}
		s += n
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

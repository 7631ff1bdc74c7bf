package ublk

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The write-zeroes and discard probe of a member file leaves its size and
// data as they were, and finds tmpfs unable to zero ranges (it answered
// EOPNOTSUPP to every WRITE_ZEROES, which failed the members).
func TestMemberFileProbe(t *testing.T) {
	dirs := []string{t.TempDir()}
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		d, err := os.MkdirTemp("/dev/shm", "probe")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, d)
		}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "m")
		data := bytes.Repeat([]byte{0x5a}, 2<<20)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := OpenMember(p)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: the probe changed the file (size %d)", dir, len(got))
		}
		if err := unix.Statfs(p, &fs); err != nil {
			t.Fatal(err)
		}
		if fs.Type == unix.TMPFS_MAGIC && m.WriteZeroes {
			t.Fatalf("%s: tmpfs reported able to zero ranges", dir)
		}
		if fs.Type == unix.TMPFS_MAGIC && !m.Discard {
			t.Fatalf("%s: tmpfs reported unable to punch holes", dir)
		}
		if fs.Type == unix.EXT4_SUPER_MAGIC && (!m.WriteZeroes || !m.Discard) {
			t.Fatalf("%s: ext4 reported discard %v write-zeroes %v", dir, m.Discard, m.WriteZeroes)
		}
	}
}

// Every reader of a member gets the file-type check, the read-only one
// (examine, examine-bitmap) as well as OpenMember: one line, before
// anything is opened.
func TestOpenMemberReadOnlyRefusesOtherFileTypes(t *testing.T) {
	for _, p := range []string{t.TempDir(), "/dev/null"} {
		for name, open := range map[string]func(string) (*Member, error){"OpenMember": OpenMember, "OpenMemberReadOnly": OpenMemberReadOnly} {
			m, err := open(p)
			if err == nil {
				m.Close()
			}
			if want := "member " + p + " is neither a block device nor a regular file"; err == nil || err.Error() != want {
				t.Errorf("%s(%s): %v; want %q", name, p, err, want)
			}
		}
	}
}

// A partition's sysfs directory has no queue/ of its own: the write
// cache, discard and rotational properties are its disk's. Read from the
// partition's own directory they were all missing, and a passthrough of
// /dev/sda1 on a write-back disk advertised no volatile cache, so the
// kernel dropped every FLUSH and FUA: data loss on power cut.
func TestMemberProbeQueuePartition(t *testing.T) {
	root := t.TempDir()
	disk := filepath.Join(root, "devices", "sda")
	part := filepath.Join(disk, "sda1")
	for _, d := range []string{filepath.Join(disk, "queue"), part, filepath.Join(root, "dev", "block")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"queue/write_cache":         "write back\n",
		"queue/discard_max_bytes":   "2147450880\n",
		"queue/discard_granularity": "4096\n",
		"queue/rotational":          "1\n",
		"sda1/partition":            "1\n",
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(disk, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// /sys/dev/block/8:1 is a symbolic link to the partition's directory.
	link := filepath.Join(root, "dev", "block", "8:1")
	if err := os.Symlink("../../devices/sda/sda1", link); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{link, filepath.Join(root, "dev", "block", "8:0")} {
		if dev != link {
			if err := os.Symlink("../../devices/sda", dev); err != nil {
				t.Fatal(err)
			}
		}
		m := &Member{MemberProps: MemberProps{LogicalBlock: 512}}
		m.probeQueue(dev)
		if !m.VolatileCache || !m.Discard || m.DiscardGranularity != 4096 || !m.Rotational {
			t.Errorf("%s: %+v; want the disk's write-back cache, discard and rotational", dev, m.MemberProps)
		}
	}
	// A cache that cannot be read is taken for a write-back one.
	m := &Member{MemberProps: MemberProps{LogicalBlock: 512}}
	m.probeQueue(filepath.Join(root, "nowhere"))
	if !m.VolatileCache {
		t.Error("unreadable write_cache: no volatile cache advertised")
	}
}

package array

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// Found by review: two members with the same base name (img in two
// directories) were told apart by position ("img", "img#1"), so after a
// fail and remove of role 0 the series {member="img"} became role 1's
// device, and after the re-add role 0's again: one series carried two
// devices' counters (going backwards), and an alert named the wrong disk.
// The label is now the device's own (its path below /dev, or its path):
// each device keeps its label, and each label its device.
func TestMetricsMemberLabelStaysWithDevice(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, d := range []string{"a", "b"} {
		p := filepath.Join(dir, d, "img")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 16<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	deviceOf := map[string]string{} // label -> the device it named first
	last := map[string]uint64{}     // label -> read+write ops at the last scrape
	scrape := func(when string, want ...string) {
		t.Helper()
		st := a.Metrics("ublkb0")
		var got []string
		for _, ms := range st.Members {
			got = append(got, ms.Name)
			var dev string
			for _, m := range a.Status().Members {
				if m.Path != "" && memberLabel(m.Path) == ms.Name {
					dev = m.Path
				}
			}
			if d, ok := deviceOf[ms.Name]; ok && d != dev {
				t.Errorf("%s: member=%q names %s, named %s before", when, ms.Name, dev, d)
			}
			deviceOf[ms.Name] = dev
			n := ms.Ops[metrics.OpRead].Ops + ms.Ops[metrics.OpWrite].Ops
			if p, ok := last[ms.Name]; ok && n < p {
				t.Errorf("%s: member=%q went backwards: %d -> %d", when, ms.Name, p, n)
			}
			last[ms.Name] = n
		}
		if len(got) != len(want) {
			t.Fatalf("%s: labels %q, want %q", when, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: labels %q, want %q", when, got, want)
			}
		}
	}
	scrape("start", paths...)
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	scrape("after check", paths...)
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	scrape("after fail 0", paths...)
	if err := a.Remove(0); err != nil {
		t.Fatal(err)
	}
	scrape("after remove 0", paths[1])
	if err := a.ReAdd(paths[0]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	scrape("after re-add", paths...)
}

func TestMemberLabel(t *testing.T) {
	for path, want := range map[string]string{
		"/dev/nvme0n1":               "nvme0n1",
		"/dev/mapper/m0":             "mapper/m0",
		"/dev/disk/by-id/nvme-foo_1": "disk/by-id/nvme-foo_1",
		"/srv/a/img":                 "/srv/a/img",
		"/dev/":                      "/dev/",
	} {
		if got := memberLabel(path); got != want {
			t.Errorf("memberLabel(%q) = %q, want %q", path, got, want)
		}
	}
}

package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A new array over a blank device and a member of another (stopped)
// array: refused, nothing written, as it must be. But the one line names
// the wrong device: "member BLANK: not a member of the array X ...: no
// ublk-raid superblock; --force overwrites it". BLANK holds nothing; the
// device the create would overwrite, and that --force would wipe, is the
// other array's member, which the line does not name (README: a device
// that holds data refuses the command "with one line naming what and
// where", e.g. "/dev/vdc carries ext4 filesystem (at byte 1080); --force
// overwrites it").
func TestReviewCliCreateOverForeignMemberNamesIt(t *testing.T) {
	fakeDevices(t)
	const size = 8 << 20
	other := files(t, 2, size)
	o, err := array.Open(other, array.CreateSpec{Name: "other", Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetClean(true); err != nil {
		t.Fatal(err)
	}
	o.Close()
	blank := files(t, 1, size)[0]
	m := NewManager(nil, ManagerOptions{})
	n := 3
	before := hashes(t, other[0], blank)
	_, err = m.Add(context.Background(), AddRequest{Members: []string{blank, other[0]}, Level: "1", Number: &n})
	sameHashes(t, "refused create", before, hashes(t, other[0], blank))
	if err == nil || statusOf(err) != http.StatusConflict {
		t.Fatalf("create over %s (a member of array \"other\") and blank %s: %v; want 409", other[0], blank, err)
	}
	if msg := err.Error(); !strings.Contains(msg, other[0]) {
		t.Errorf("create refused with %q: it does not name %s, the device carrying array \"other\"'s superblock (that --force would overwrite), only the blank %s", msg, other[0], blank)
	}
}

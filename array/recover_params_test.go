package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (live upgrade): the array's device always advertises a volatile
// cache and FUA, so that a member with a write-back cache put in later
// gets every FLUSH (TestParamsAlwaysVolatileCache: "It used to follow
// the members of the day only"). A device made by a version from before
// that, over members without a write-back cache, has neither attribute,
// and its parameters cannot change while it lives; Recover asks the array
// (CheckDevice) whether it can serve it, and the array said yes. After
// the upgrade a spare or replacement with a write-back cache then never
// received a FLUSH: fsync on the device returned with the data in that
// member's volatile cache.
func TestCheckDeviceRefusesDeviceWithoutFlush(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dev := a.Params()
	dev.Basic.Attrs &^= ublk.AttrVolatileCache | ublk.AttrFUA // made before the array always advertised them
	if err := a.CheckDevice(dev); err == nil {
		t.Fatalf("CheckDevice accepts a device without VOLATILE_CACHE|FUA (attrs %#x); the array needs them (attrs %#x): no FLUSH reaches its members after the hand-over",
			dev.Basic.Attrs, a.Params().Basic.Attrs)
	}
}

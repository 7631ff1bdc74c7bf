package array

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: a name given at assembly was ignored, so `add --name
// prod` over the members of array "test" served "test" as if it were the
// array asked for. As mdadm --assemble --name, the name selects: members
// of an array of another name are refused, and nothing is written.
func TestAssembleNameMismatchRefused(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Name: "test", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	before := fileBytes(t, paths...)
	for _, create := range []bool{false, true} {
		spec := CreateSpec{Name: "prod", Level: -1}
		if create {
			spec = CreateSpec{Name: "prod", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}
		}
		b, err := Open(paths, spec, create)
		if err == nil {
			b.Close()
			t.Fatalf("create=%v: members of array \"test\" assembled under the name \"prod\"", create)
		}
		if !strings.Contains(err.Error(), `"test"`) {
			t.Errorf("create=%v: refusal does not name the array the members hold: %v", create, err)
		}
	}
	for i, b := range fileBytes(t, paths...) {
		if !bytes.Equal(b, before[i]) {
			t.Errorf("%s changed by the refused assembly", paths[i])
		}
	}
	// The right name (or none) assembles.
	for _, name := range []string{"test", ""} {
		b, err := Open(paths, CreateSpec{Name: name, Level: -1}, false)
		if err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		b.Close()
	}
}

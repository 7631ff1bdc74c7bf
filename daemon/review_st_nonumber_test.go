package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// Found by review (st). State.check "refuses a state no daemon writes":
// an entry without its UUID or its members stops serve. An entry without
// its device number (hand-edited: the key misspelled, "numbr", or left
// out) is no state a daemon writes either ("number" has no omitempty),
// yet it loads as number 0: the array is then served as /dev/ublkb0, not
// at the number its users (fstab, the entry's own history) know, and
// /dev/ublkb0 is taken from whatever expects it. The misspelled key is
// dropped without a word.
func TestReviewstStateEntryWithoutNumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arrays.json")
	body := `{"version": 1, "arrays": [
  {"numbr": 3, "uuid": "8c0e5c3a-6b7e-4d4a-9d55-0f0c7a1e2b33", "members": ["/dev/vdc", "/dev/vdd"]}
]}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(path)
	if err == nil {
		t.Errorf("LoadState accepted an entry without its device number: %+v (it would be served as %s)", st.Arrays, DevicePath(st.Arrays[0].Number))
	}
}

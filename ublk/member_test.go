package ublk

import (
	"testing"
)

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

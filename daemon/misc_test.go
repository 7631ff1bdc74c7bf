package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify("READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
	for _, name := range []string{
		filepath.Join(t.TempDir(), "notify"),
		fmt.Sprintf("@ublk-raid-test-%d-%d", os.Getpid(), time.Now().UnixNano()), // abstract
	} {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", name)
		if err := Notify("READY=1\nSTATUS=serving 0 array(s)"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := make([]byte, 256)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(b)
		if err != nil || string(b[:n]) != "READY=1\nSTATUS=serving 0 array(s)" {
			t.Fatalf("%s: got %q %v", name, b[:n], err)
		}
		c.Close()
	}
	t.Setenv("NOTIFY_SOCKET", "relative")
	if err := Notify("READY=1"); err == nil {
		t.Fatal("relative NOTIFY_SOCKET accepted")
	}
}

func TestStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lib", "arrays.json")
	s, err := LoadState(path)
	if err != nil || len(s.Arrays) != 0 {
		t.Fatalf("missing file: %+v %v", s, err)
	}
	want := State{Version: 1, Arrays: []StateEntry{
		{Number: 0, UUID: "u0", Members: []string{"/dev/a", "/dev/b"}, Queues: 2, Depth: 128, MaxIOBytes: 512 << 10},
		{Number: 3, UUID: "u3", Name: "tank", Members: []string{"/dev/c"}, SyncMinBytes: 1 << 20, SyncMaxBytes: 8 << 20},
	}}
	if err := SaveState(path, State{Arrays: []StateEntry{want.Arrays[1], want.Arrays[0]}}); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v", fi.Mode())
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, err := LoadState(path); err == nil {
		t.Fatal("corrupt state file accepted")
	}
	os.WriteFile(path, []byte(`{"version":2,"arrays":[]}`), 0o600)
	if _, err := LoadState(path); err == nil {
		t.Fatal("state file version 2 accepted")
	}
}

// A state file no daemon writes (a device number out of range or twice,
// an array twice, no UUID, no members) is refused as a
// whole: serve stops rather than start or forget arrays by guesswork.
func TestLoadStateRefusesInconsistentEntries(t *testing.T) {
	ok := StateEntry{Number: 1, UUID: "u1", Members: []string{"/dev/a"}}
	for name, es := range map[string][]StateEntry{
		"number-negative": {{Number: -1, UUID: "u", Members: []string{"/dev/b"}}},
		"number-too-big":  {{Number: 1 << 32, UUID: "u", Members: []string{"/dev/b"}}},
		"number-twice":    {ok, {Number: 1, UUID: "u2", Members: []string{"/dev/b"}}},
		"uuid-twice":      {ok, {Number: 2, UUID: "u1", Members: []string{"/dev/b"}}},
		"no-uuid":         {{Number: 2, Members: []string{"/dev/b"}}},
		"no-members":      {{Number: 2, UUID: "u2"}},
	} {
		path := filepath.Join(t.TempDir(), "arrays.json")
		if err := SaveState(path, State{Arrays: es}); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadState(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	path := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(path, State{Arrays: []StateEntry{ok, {Number: 2, UUID: "u2", Members: []string{"/dev/b"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(path); err != nil {
		t.Errorf("a consistent state file refused: %v", err)
	}
}

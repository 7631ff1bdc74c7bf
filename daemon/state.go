package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/ublk-raid/ublk-raid/engine"
)

// DefaultStateFile is where serve records its arrays.
const DefaultStateFile = "/var/lib/ublk-raid/arrays.json"

// State is the content of the state file: the arrays the daemon serves,
// so that a new daemon can find them again (see the package comment).
type State struct {
	Version int          `json:"version"` // 1
	Arrays  []StateEntry `json:"arrays"`
}

// StateEntry is one array of the state file.
type StateEntry struct {
	Number  int      `json:"number"` // N of /dev/ublkbN
	UUID    string   `json:"uuid"`   // the array's UUID (checked on assembly)
	Name    string   `json:"name,omitempty"`
	Members []string `json:"members"` // member paths, as given to add
	// WriteMostly are members read only when no other copy can serve.
	WriteMostly []string `json:"write_mostly,omitempty"`
	// WriteMostlyRoles are the roles read write-mostly (the flag belongs
	// to the role: Manager.followWriteMostly). A start marks these, not
	// the paths: device names may move between boots, roles do not. The
	// paths are for the reader, and for state files written before.
	WriteMostlyRoles []int `json:"write_mostly_roles,omitempty"`
	// Queue settings the device was created with (a fresh assembly uses
	// them again; a recovery takes them from the kernel).
	Queues     int `json:"queues,omitempty"`
	Depth      int `json:"depth,omitempty"`
	MaxIOBytes int `json:"max_io_bytes,omitempty"`
	// Sync speed bounds the array was added with (0: the defaults), so
	// that a restarted daemon keeps throttling a rebuild it resumes.
	SyncMinBytes uint64 `json:"sync_speed_min_bytes,omitempty"`
	SyncMaxBytes uint64 `json:"sync_speed_max_bytes,omitempty"`
	// GrowFromSectors is the device's size (512-byte sectors) when a grow
	// began, until the kernel took the grown size: a restarted daemon
	// that finds the device at exactly this size, smaller than the
	// array, finishes that grow (UPDATE_SIZE); any other size mismatch is
	// not this array's device.
	GrowFromSectors uint64 `json:"grow_from_sectors,omitempty"`
	// Joining are devices a member operation (replace, add-spare,
	// re-add) is putting into the array, recorded before any superblock
	// names them: a daemon dying before the operation's own state file
	// write would otherwise leave them out of Members, and the restart
	// would assemble the array without them (a replacement forgotten:
	// degraded, or refused once rebuilt). A start takes each one the
	// operation's superblock update reached (see joined), and drops the
	// rest (one it cannot read, with a warning).
	Joining []string `json:"joining,omitempty"`
}

// maxStateBytes bounds the state file read: a file of the most arrays
// and members any daemon serves is far smaller.
const maxStateBytes = 16 << 20

// LoadState reads the state file; a missing file is an empty state. It
// must be a regular file of at most maxStateBytes (a path naming a
// device, a pipe or /dev/zero is refused, not read without bound).
func LoadState(path string) (State, error) {
	b, err := readStateFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return State{Version: 1}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("state file: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("state file %s: %w", path, err)
	}
	// Every entry names its device: a missing (or misspelt) "number"
	// would serve the array as /dev/ublkb0.
	var raw struct {
		Arrays []struct {
			Number *int `json:"number"`
		} `json:"arrays"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return State{}, fmt.Errorf("state file %s: %w", path, err)
	}
	for i, e := range raw.Arrays {
		if e.Number == nil {
			return State{}, fmt.Errorf("state file %s: array entry %d has no device number", path, i)
		}
	}
	for i := range s.Arrays {
		// Shown for an array that does not start (list, detail): a
		// name no superblock holds is dropped, not shown.
		if n := s.Arrays[i].Name; n != "" && engine.ValidName(n) != nil {
			s.Arrays[i].Name = ""
		}
	}
	if s.Version != 1 {
		return State{}, fmt.Errorf("state file %s: version %d, want 1", path, s.Version)
	}
	if err := s.check(); err != nil {
		return State{}, fmt.Errorf("state file %s: %w", path, err)
	}
	return s, nil
}

// MaxDevice bounds the device numbers the daemon takes, in requests and
// in the state file (the ublk driver's own limit is 2^20).
const MaxDevice = 1 << 20

// check refuses a state no daemon writes: a device number out of range
// or twice, an array twice, an entry without its UUID (it is checked on
// assembly) or members. (A relative member path, which older daemons
// took, leaves its entry pending.)
func (s State) check() error {
	numbers, uuids := map[int]bool{}, map[string]bool{}
	for _, e := range s.Arrays {
		switch {
		case e.Number < 0 || e.Number >= MaxDevice:
			return fmt.Errorf("device number %d out of range", e.Number)
		case numbers[e.Number]:
			return fmt.Errorf("device number %d twice", e.Number)
		case e.UUID == "":
			return fmt.Errorf("%s: no array UUID", DevicePath(e.Number))
		case uuids[e.UUID]:
			return fmt.Errorf("array %s twice", e.UUID)
		case len(e.Members) == 0:
			return fmt.Errorf("%s: no members", DevicePath(e.Number))
		}
		numbers[e.Number], uuids[e.UUID] = true, true
	}
	return nil
}

// SaveState replaces the state file atomically: a temporary file in the
// same directory, written and fsynced, renamed over path, and the
// directory fsynced, so a crash leaves either the old or the new file.
func SaveState(path string, s State) error {
	s.Version = 1
	sort.Slice(s.Arrays, func(i, j int) bool { return s.Arrays[i].Number < s.Arrays[j].Number })
	if s.Arrays == nil {
		s.Arrays = []StateEntry{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	f, err := os.CreateTemp(dir, ".arrays-*.json")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("state file: fsync %s: %w", dir, err)
	}
	return nil
}

// readStateFile reads the regular file at path, of at most maxStateBytes.
func readStateFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() > maxStateBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a state file may have", path, fi.Size(), maxStateBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("%s: more than the %d bytes a state file may have", path, maxStateBytes)
	}
	return b, nil
}

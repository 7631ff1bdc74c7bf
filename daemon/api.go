package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// APIVersion is the path prefix of every endpoint; a change that breaks
// clients gets a new prefix.
const APIVersion = "/v1"

// AddRequest is the body of POST /v1/arrays: create a new array over
// Members or assemble the one their superblocks describe. Numeric fields
// are omitted when zero, so in the API a 0 means the default (the CLI
// refuses an explicit --chunk 0 or --bitmap-region 0 instead).
type AddRequest struct {
	// Members are member block devices or files, in role order for a new
	// array.
	Members []string `json:"members"`
	// Level is "0", "1", "10", "5" or "6" ("raid0", "raid1", "raid10",
	// "raid5", "raid6" accepted) for a new array; "" only assembles (the
	// members must carry superblocks).
	Level string `json:"level,omitempty"`
	// Layout is the raid10 layout: n2 (default), f2, o2, n3, f3, o3; or
	// the raid5/6 layout: left-symmetric (ls, default), right-symmetric
	// (rs), left-asymmetric (la), right-asymmetric (ra).
	Layout string `json:"layout,omitempty"`
	// ChunkBytes is the chunk size of a new array: a power of two from
	// 4 KiB to 64 MiB; 0 (or absent) means 512 KiB. New arrays only.
	ChunkBytes uint64 `json:"chunk_bytes,omitempty"`
	// Name is the array name stored in the superblocks: up to 32 bytes of
	// UTF-8 text without control characters.
	Name string `json:"name,omitempty"`
	// Number is the wanted N of /dev/ublkbN; absent or -1: the first free.
	Number *int `json:"number,omitempty"`
	// Queues is the number of ublk queues (0: one per CPU, at most 8);
	// Depth the requests in flight per queue (0: 128); MaxIOBytes the
	// largest request (0: 512 KiB).
	Queues     int `json:"queues,omitempty"`
	Depth      int `json:"depth,omitempty"`
	MaxIOBytes int `json:"max_io_bytes,omitempty"`
	// NoBitmap creates a raid1/10 without a write-intent bitmap;
	// BitmapRegionBytes is its region size (0 or absent: from the array
	// size);
	// AssumeClean starts it with every region in sync (mdadm
	// --assume-clean). New arrays only.
	// WriteMostly are members (of Members) read only when no other copy
	// can serve (raid1/raid10).
	WriteMostly       []string `json:"write_mostly,omitempty"`
	NoBitmap          bool     `json:"no_bitmap,omitempty"`
	BitmapRegionBytes uint64   `json:"bitmap_region_bytes,omitempty"`
	AssumeClean       bool     `json:"assume_clean,omitempty"`
	// SyncMinBytes and SyncMaxBytes bound rebuild, resync and check speed
	// per second (md's sync_speed_min/max; 0: 1000 KiB/s and no limit).
	SyncMinBytes uint64 `json:"sync_speed_min_bytes,omitempty"`
	SyncMaxBytes uint64 `json:"sync_speed_max_bytes,omitempty"`
	// Spares are devices held as spares (raid1/raid10): a failed role is
	// rebuilt onto one at once. Blank ones are written as spares; at
	// assembly, spares of this array are taken as they are.
	Spares []string `json:"spares,omitempty"`
	// Force overwrites members and blank spares that carry a signature
	// of data (a filesystem, partition table, RAID or LVM metadata, ...);
	// without it they are refused and nothing is written. At assembly it
	// starts the array from the members given even when they disagree
	// about each other (a split brain: each ran without the other) or the
	// freshest records itself failed: the freshest is authoritative and
	// the others are fully rebuilt from it.
	Force bool `json:"force,omitempty"`
}

// FieldError is what AddRequest.Spec refuses: one field of the request,
// named by its JSON name, so that a client can name it its own way (the
// CLI as its flag).
type FieldError struct {
	// Field is the JSON name of the field at fault ("chunk_bytes").
	Field string
	// Value is the value at fault as the message shows it ("" for none).
	Value string
	// Err says what is wrong, without naming the field.
	Err error
	// Other is the JSON name of a field Field conflicts with ("" for
	// none); the message names it after Err.
	Other string
}

func (e *FieldError) Error() string { return e.Message(func(f string) string { return f }) }
func (e *FieldError) Unwrap() error { return e.Err }

// Message is the one-line error with the field names spelled by name:
// "<field>[ <value>]: <err>[ <other>]".
func (e *FieldError) Message(name func(field string) string) string {
	s := name(e.Field)
	if e.Value != "" {
		s += " " + e.Value
	}
	s += ": " + e.Err.Error()
	if e.Other != "" {
		s += " " + name(e.Other)
	}
	return s
}

func fieldErr(field, value string, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Value: value, Err: fmt.Errorf(format, a...)}
}

// shown is s as a message shows it: as is when it is printable text,
// quoted otherwise.
func shown(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s || s == "" {
		return q
	}
	return s
}

// checkText refuses what cannot be stored or carried as text: invalid
// UTF-8 (JSON would replace it with U+FFFD, silently naming something
// else), U+FFFD itself (the mark of such a replacement) and control
// characters.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			return errors.New("holds U+FFFD, the mark of text that was not valid UTF-8")
		case unicode.IsControl(r):
			return errors.New("holds a control character")
		}
	}
	return nil
}

// checkAbs refuses a relative path: the daemon would resolve it against
// its own working directory, not the client's, and name another file.
func checkAbs(p string) error {
	if !filepath.IsAbs(p) {
		return errors.New("relative path: give it absolute (the daemon does not run in the client's directory)")
	}
	return nil
}

// deviceKeys identifies the device or file at path for duplicate checks,
// without opening it: its path cleaned and with symlinks resolved, and,
// when it exists, its device number (block devices) or inode (files).
func deviceKeys(path string) []string {
	p := CleanPath(path)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	keys := []string{"path:" + p}
	var st unix.Stat_t
	if unix.Stat(p, &st) == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFBLK:
			keys = append(keys, fmt.Sprintf("blk:%d", st.Rdev))
		case unix.S_IFREG:
			keys = append(keys, fmt.Sprintf("file:%d:%d", st.Dev, st.Ino))
		}
	}
	return keys
}

// CleanPath returns path without "." elements or repeated slashes, as
// filepath.Clean, except that a ".." element is not removed as text
// (which names another file when the element before it is a symlink, as
// "srv/../img" with srv a link into another directory): the path up to
// its last ".." is resolved through its symlinks as the kernel resolves
// it (filepath.EvalSymlinks), and the elements after it are kept as
// given (a stable name such as /dev/disk/by-id/X stays that name). Where
// that prefix cannot be resolved, path is returned as it is, so that
// opening it fails as the kernel fails it rather than opening the file
// its text names.
func CleanPath(path string) string {
	elems := strings.Split(path, "/")
	last := -1
	for i, e := range elems {
		if e == ".." {
			last = i
		}
	}
	if last < 0 {
		return filepath.Clean(path)
	}
	prefix := strings.Join(elems[:last+1], "/")
	if prefix == "" {
		prefix = "/"
	}
	r, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		return path
	}
	return filepath.Join(append([]string{r}, elems[last+1:]...)...)
}

// SameDevice reports whether paths p and q name the same device or file:
// the same path once symlinks are resolved, the same block device
// number, or the same file.
func SameDevice(p, q string) bool { return sameDevice(p, q) }

// sameDevice reports whether paths p and q name the same device or file
// (as deviceKeys tells).
func sameDevice(p, q string) bool {
	kq := deviceKeys(q)
	for _, k := range deviceKeys(p) {
		if slices.Contains(kq, k) {
			return true
		}
	}
	return false
}

// Spec validates the request's array parameters (no device is opened;
// paths are resolved to find a device given twice). Its errors are
// *FieldError.
func (r AddRequest) Spec() (array.CreateSpec, error) {
	s, fe := r.spec()
	if fe != nil {
		return s, fe
	}
	return s, nil
}

func (r AddRequest) spec() (array.CreateSpec, *FieldError) {
	var s array.CreateSpec
	s.Name = r.Name
	if len(r.Members) == 0 {
		return s, fieldErr("members", "", "at least one member is needed")
	}
	if err := checkText(r.Name); err != nil {
		return s, &FieldError{Field: "name", Value: strconv.Quote(r.Name), Err: err}
	}
	if len(r.Name) > engine.ArrayNameMax {
		return s, fieldErr("name", strconv.Quote(r.Name), "at most %d bytes", engine.ArrayNameMax)
	}
	if err := engine.ValidName(r.Name); err != nil {
		// What the superblock refuses ('/'), refused before any member
		// is opened: bad usage.
		return s, &FieldError{Field: "name", Err: err}
	}
	switch r.Level {
	case "":
		s.Level = -1 // assemble only
	case "0", "raid0":
		s.Level = engine.Level0
	case "1", "raid1", "mirror":
		s.Level = engine.Level1
	case "10", "raid10":
		s.Level = engine.Level10
	case "5", "raid5":
		s.Level = engine.Level5
	case "6", "raid6":
		s.Level = engine.Level6
	default:
		return s, fieldErr("level", strconv.Quote(r.Level), "want 0, 1, 5, 6 or 10")
	}
	if s.Level < 0 {
		// An assembly takes these from the superblocks: given, they
		// would be ignored (mdadm --assemble has none of them).
		for _, f := range []struct {
			field string
			set   bool
		}{{"layout", r.Layout != ""}, {"chunk_bytes", r.ChunkBytes != 0}, {"no_bitmap", r.NoBitmap},
			{"bitmap_region_bytes", r.BitmapRegionBytes != 0}, {"assume_clean", r.AssumeClean}} {
			if f.set {
				return s, fieldErr(f.field, "", "is for creating an array (give the level); an assembly takes what the superblocks say")
			}
		}
	}
	if s.Level == engine.Level1 && r.ChunkBytes != 0 {
		// As mdadm ("specifying chunk size is forbidden for this
		// level"): a mirror has no chunks, and a chunk given for one
		// is a mistake about the level.
		return s, fieldErr("chunk_bytes", strconv.FormatUint(r.ChunkBytes, 10), "raid1 has no chunks (leave it out)")
	}
	if s.Level == engine.Level0 && r.BitmapRegionBytes != 0 {
		return s, fieldErr("bitmap_region_bytes", "", "raid0 has no bitmap (no redundancy to resync)")
	}
	parity := engine.IsParityLevel(s.Level)
	switch {
	case r.Layout != "" && parity:
		l, err := engine.ParseParityLayout(r.Layout)
		if err != nil {
			return s, &FieldError{Field: "layout", Value: strconv.Quote(r.Layout), Err: err}
		}
		s.ParityLayout = l
	case r.Layout != "" && s.Level == engine.Level10:
		l, err := engine.ParseLayout(r.Layout)
		if err != nil {
			return s, &FieldError{Field: "layout", Value: strconv.Quote(r.Layout), Err: err}
		}
		s.Layout = l
	case r.Layout != "":
		return s, fieldErr("layout", strconv.Quote(r.Layout), "is for raid5, raid6 and raid10 only")
	case parity:
		s.ParityLayout = engine.LeftSymmetric // md's default
	case s.Level == engine.Level10:
		s.Layout = engine.LayoutN2
	}
	s.LayoutGiven, s.ChunkGiven = r.Layout != "", r.ChunkBytes != 0
	chunk := r.ChunkBytes
	if chunk == 0 {
		chunk = 512 << 10
	}
	if chunk < 4096 || chunk > 64<<20 || chunk&(chunk-1) != 0 {
		return s, fieldErr("chunk_bytes", strconv.FormatUint(r.ChunkBytes, 10), "must be a power of two from 4K to 64M")
	}
	s.ChunkSectors = chunk >> 9
	if parity {
		g := engine.ParityGeometry{Level: s.Level, Members: len(r.Members), Layout: s.ParityLayout, ChunkSectors: s.ChunkSectors,
			MemberSectors: engine.MaxMemberSectors}
		if err := g.Validate(); err != nil {
			return s, &FieldError{Field: "members", Err: err}
		}
	} else if s.Level >= 0 {
		g := engine.Geometry{Level: s.Level, Members: len(r.Members), Layout: s.Layout, ChunkSectors: s.ChunkSectors,
			MemberSectors: engine.MaxMemberSectors}
		if err := g.Validate(); err != nil {
			return s, &FieldError{Field: "members", Err: err}
		}
	}
	// Every device once: a member given twice (under any name) would be
	// opened twice and its roles would overwrite each other.
	seen := map[string]string{}
	for _, list := range []struct {
		field string
		paths []string
	}{{"members", r.Members}, {"spares", r.Spares}} {
		for _, p := range list.paths {
			if p == "" {
				return s, fieldErr(list.field, `""`, "empty path")
			}
			if err := checkText(p); err != nil {
				return s, &FieldError{Field: list.field, Value: shown(p), Err: err}
			}
			if err := checkAbs(p); err != nil {
				return s, &FieldError{Field: list.field, Value: shown(p), Err: err}
			}
			for _, k := range deviceKeys(p) {
				if first, ok := seen[k]; ok {
					if first == p {
						return s, fieldErr(list.field, shown(p), "given twice")
					}
					return s, fieldErr(list.field, shown(p), "given twice (as %s)", shown(first))
				}
			}
			for _, k := range deviceKeys(p) {
				seen[k] = p
			}
		}
		if list.field == "spares" && len(list.paths) > 0 && s.Level == engine.Level0 {
			return s, fieldErr("spares", "", "raid0 has no redundancy to rebuild")
		}
	}
	s.Spares = r.Spares
	s.Force = r.Force
	for i, w := range r.WriteMostly {
		if !slices.Contains(r.Members, w) {
			return s, fieldErr("write_mostly", shown(w), "not one of the members (give it as the members spell it)")
		}
		if slices.Contains(r.WriteMostly[:i], w) {
			return s, fieldErr("write_mostly", shown(w), "given twice")
		}
		if s.Level == engine.Level0 {
			return s, fieldErr("write_mostly", "", "raid0 has a single copy of everything")
		}
		if parity {
			return s, fieldErr("write_mostly", "", "%s reads every member's own chunks: no member can be read less", s.Level)
		}
	}
	s.WriteMostly = r.WriteMostly
	s.NoBitmap, s.AssumeClean = r.NoBitmap, r.AssumeClean
	if rb := r.BitmapRegionBytes; rb != 0 {
		v := strconv.FormatUint(rb, 10)
		if r.NoBitmap {
			return s, &FieldError{Field: "bitmap_region_bytes", Value: v, Err: errors.New("contradicts"), Other: "no_bitmap"}
		}
		if rb < 64<<10 || rb&(rb-1) != 0 {
			return s, fieldErr("bitmap_region_bytes", v, "must be a power of two of at least 64K")
		}
		s.RegionSectors = rb >> 9
	}
	if r.SyncMaxBytes != 0 && r.SyncMinBytes > r.SyncMaxBytes {
		return s, &FieldError{Field: "sync_speed_min_bytes", Value: strconv.FormatUint(r.SyncMinBytes, 10),
			Err: errors.New("is above"), Other: "sync_speed_max_bytes"}
	}
	s.SyncMinBytes, s.SyncMaxBytes = r.SyncMinBytes, r.SyncMaxBytes
	switch {
	case r.Number != nil && (*r.Number < -1 || *r.Number >= MaxDevice):
		return s, fieldErr("number", strconv.Itoa(*r.Number), "must be -1 or a device number")
	case r.Queues < 0 || r.Queues > 4096:
		return s, fieldErr("queues", strconv.Itoa(r.Queues), "must be 0..4096")
	case r.Depth < 0 || r.Depth > 4096:
		return s, fieldErr("depth", strconv.Itoa(r.Depth), "must be 0..4096")
	case r.MaxIOBytes < 0 || r.MaxIOBytes%4096 != 0 || r.MaxIOBytes > 32<<20:
		return s, fieldErr("max_io_bytes", strconv.Itoa(r.MaxIOBytes), "must be a multiple of 4K up to 32M")
	}
	return s, nil
}

// GrowRequest is the body of POST /v1/arrays/{n}/grow.
type GrowRequest struct {
	// SizeBytes is each member's new data area (md's component size: the
	// array's size for raid1), rounded down to 4 KiB; 0 is the most every
	// member allows (mdadm --grow --size=max).
	SizeBytes uint64 `json:"size_bytes"`
}

// MemberRequest is the body of POST /v1/arrays/{n}/{fail,remove,re-add,add-spare,replace}.
type MemberRequest struct {
	// Member is the member's absolute path (any path to the same device
	// or file), or its role number ("0", "1", ...); for add-spare the new
	// device.
	Member string `json:"member"`
	// Members are, for add-spare instead of Member, several new devices:
	// every one is checked before any is added, so a refusal adds none.
	Members []string `json:"members,omitempty"`
	// With is, for replace, the new member that takes over (optional: a
	// spare otherwise).
	With string `json:"with,omitempty"`
	// Force, for add-spare and replace, overwrites a new device that
	// carries another array's superblock or a signature of data.
	Force bool `json:"force,omitempty"`
}

// check validates r as the body of member operation op (touching no
// device): a member is given (a role number, except for add-spare, or an
// absolute path of text), with only where replace takes it, force only
// where add-spare and replace take it, and no device twice in members.
func (r MemberRequest) check(op string) *FieldError {
	switch {
	case len(r.Members) > 0 && op != "add-spare":
		return fieldErr("members", "", "only add-spare takes several devices")
	case len(r.Members) > 0 && r.Member != "":
		return fieldErr("members", "", "give member or members, not both")
	case len(r.Members) == 0 && r.Member == "":
		return fieldErr("member", "", "missing (a path or a role number)")
	case r.With != "" && op != "replace":
		return fieldErr("with", shown(r.With), "only replace takes it")
	case r.Force && op != "add-spare" && op != "replace":
		return fieldErr("force", "", "only add-spare and replace take it")
	}
	path := func(field, p string) *FieldError {
		if p == "" {
			return fieldErr(field, `""`, "empty path")
		}
		if err := checkText(p); err != nil {
			return &FieldError{Field: field, Value: shown(p), Err: err}
		}
		if err := checkAbs(p); err != nil {
			return &FieldError{Field: field, Value: shown(p), Err: err}
		}
		return nil
	}
	if _, err := strconv.Atoi(r.Member); r.Member != "" && (err != nil || op == "add-spare") {
		if fe := path("member", r.Member); fe != nil {
			return fe
		}
	}
	if r.With != "" {
		if fe := path("with", r.With); fe != nil {
			return fe
		}
	}
	for i, p := range r.Members {
		if fe := path("members", p); fe != nil {
			return fe
		}
		for _, q := range r.Members[:i] {
			if p == q {
				return fieldErr("members", shown(p), "given twice")
			}
			if sameDevice(p, q) {
				return fieldErr("members", shown(p), "given twice (as %s)", shown(q))
			}
		}
	}
	return nil
}

// Array is one array as the API reports it (add, list, detail, and the
// member operations answer with it).
type Array struct {
	Number int    `json:"number"` // N of /dev/ublkbN
	Device string `json:"device"` // /dev/ublkbN
	Name   string `json:"name"`
	UUID   string `json:"uuid"`
	Level  string `json:"level"`            // raid0, raid1, raid10
	Layout string `json:"layout,omitempty"` // raid10: n2, f2, o2, n3, f3, o3
	// ChunkBytes is the chunk size; SizeBytes the array's capacity.
	ChunkBytes uint64 `json:"chunk_bytes"`
	SizeBytes  uint64 `json:"size_bytes"`
	// State is "active" (every role in sync), "degraded" (data complete,
	// some role not in sync), "failed" (some data has no copy) or
	// "broken" (a raid0 whose member failed a write: writes fail until
	// the next assembly, as md's raid0 array_state "broken"); list
	// shows an array of the state file that did not start "inactive",
	// with the paths the state file lists (role -1, state "inactive").
	State        string `json:"state"`
	Degraded     bool   `json:"degraded"`
	RaidDisks    int    `json:"raid_disks"`
	ActiveDisks  int    `json:"active_disks"`
	FailedDisks  int    `json:"failed_disks"`
	MissingDisks int    `json:"missing_disks"`
	SpareDisks   int    `json:"spare_disks"`
	Events       uint64 `json:"events"` // superblock generation
	// Spares are the devices standing by to take a failed role.
	Spares  []string `json:"spares"`
	Members []Member `json:"members"`
	// Queues and Depth are the ublk queue settings of the device.
	Queues int `json:"queues"`
	Depth  int `json:"depth"`
	// UblkFlags are the ublk driver features (UBLK_F_*, lower case
	// without the prefix) the device was created with: those this server
	// needs and those it uses where the kernel offers them.
	UblkFlags []string `json:"ublk_flags"`
	// Created is set when this daemon created the array (rather than
	// assembling it); Recovered when it re-attached to the device of a
	// previous daemon (user recovery).
	Created   bool      `json:"created"`
	Recovered bool      `json:"recovered"`
	Since     time.Time `json:"since"` // when this daemon started serving it
	// Sync is the background job (rebuild, resync, check, repair) or idle,
	// with the last job's outcome and check's mismatch count.
	Sync array.SyncStatus `json:"sync"`
	// Bitmap describes the write-intent bitmap; absent without one.
	Bitmap *BitmapInfo `json:"bitmap,omitempty"`
	// Warnings are things worth telling about the request that did not
	// refuse it (add: a member much larger than the array uses; add and
	// the member operations that change the state file's member lists:
	// the state file not written, the change done all the same).
	Warnings []string `json:"warnings,omitempty"`
}

// BitmapInfo is the write-intent bitmap of an array.
type BitmapInfo struct {
	Regions      int    `json:"regions"`
	RegionBytes  uint64 `json:"region_bytes"`
	DirtyRegions int64  `json:"dirty_regions"`
	// DirtyAtAssembly is how many regions were dirty when the array was
	// assembled (what resync had to cover); AllDirty says the bitmap on
	// the members could not be trusted then.
	DirtyAtAssembly int  `json:"dirty_at_assembly"`
	AllDirty        bool `json:"all_dirty_at_assembly,omitempty"`
}

// Member is one role of an array.
type Member struct {
	Role  int    `json:"role"`
	Path  string `json:"path,omitempty"` // empty when the role has no device
	State string `json:"state"`          // active, rebuilding, faulty, missing
	// RebuildOffsetBytes is, for a rebuilding member, how far (bytes of its
	// data area) it holds current data.
	RebuildOffsetBytes uint64 `json:"rebuild_offset_bytes,omitempty"`
}

// ArrayList is the answer to GET /v1/arrays.
type ArrayList struct {
	Arrays []Array `json:"arrays"`
}

// DeleteResult is the answer to DELETE /v1/arrays and /v1/arrays/{n}.
type DeleteResult struct {
	// Deleted are the block device paths deleted (their arrays marked
	// clean); Forgotten the device numbers of state-file entries removed
	// that had no running array (their assembly had failed).
	Deleted   []string `json:"deleted"`
	Forgotten []int    `json:"forgotten,omitempty"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// DeleteAllError is the error answer of a `del --all` that deleted some
// arrays and not others (in use): what it did, with the error.
type DeleteAllError struct {
	ErrorBody
	DeleteResult
}

// arrayFromStatus fills the API view of an array from its status.
func arrayFromStatus(n int, s array.Status) Array {
	a := Array{Number: n, Device: DevicePath(n), Name: s.Name, UUID: s.UUID, Level: s.Level, Layout: s.Layout,
		ChunkBytes: s.ChunkBytes, SizeBytes: s.SizeBytes, State: s.State, Degraded: s.Degraded, RaidDisks: s.RaidDisks,
		ActiveDisks: s.ActiveDisks, FailedDisks: s.FailedDisks, MissingDisks: s.MissingDisks, Events: s.Events,
		Members: []Member{}, SpareDisks: len(s.Spares), Spares: append([]string{}, s.Spares...)}
	for _, m := range s.Members {
		a.Members = append(a.Members, Member{Role: m.Role, Path: m.Path, State: m.State, RebuildOffsetBytes: m.RebuildOffset})
	}
	if s.Activating != "" {
		// A spare being put into a failed role: still the array's (md
		// keeps it in its disk table throughout), shown as a spare.
		a.Spares = append(a.Spares, s.Activating)
		a.SpareDisks++
	}
	return a
}

// pendingView is the API view of an array of the state file that did not
// start (inactive): what the entry says.
func pendingView(e StateEntry) Array {
	a := Array{Number: e.Number, Device: DevicePath(e.Number), Name: e.Name, UUID: e.UUID, State: "inactive",
		Spares: []string{}, Members: []Member{}, UblkFlags: []string{}, Sync: array.SyncStatus{Action: "idle"}}
	for _, p := range e.Members {
		if checkText(p) != nil {
			p = strconv.Quote(p) // (a hand-edited entry: shown, not played)
		}
		a.Members = append(a.Members, Member{Role: -1, Path: p, State: "inactive"})
	}
	return a
}

// viewOf is the API view of array ar served as device n.
func viewOf(n int, ar *array.Array) Array {
	a := arrayFromStatus(n, ar.Status())
	a.Sync = ar.SyncStatus()
	if bm := ar.Bitmap; bm != nil {
		g, st := bm.Geometry(), bm.Stats()
		a.Bitmap = &BitmapInfo{Regions: g.Regions, RegionBytes: g.RegionSectors << 9, DirtyRegions: st.DirtyRegions}
		if info := ar.BitmapInfo; info != nil {
			a.Bitmap.DirtyAtAssembly, a.Bitmap.AllDirty = info.Dirty, info.AllDirty
		}
	}
	return a
}

// DevicePath is /dev/ublkbN.
func DevicePath(n int) string { return "/dev/ublkb" + strconv.Itoa(n) }

// StatusError carries the HTTP status an error is answered with.
type StatusError struct {
	Code int
	Err  error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Errors a Backend returns (wrapped with %w) to choose the HTTP status;
// any other error is a 500.
var (
	// ErrNotFound: no such array or member (404).
	ErrNotFound = &StatusError{http.StatusNotFound, errors.New("not found")}
	// ErrNotAvailable: the operation exists in the API but is not
	// implemented yet (501).
	ErrNotAvailable = &StatusError{http.StatusNotImplemented, errors.New("not available yet")}
)

// Invalid wraps err as a bad request (400): the request itself is wrong.
func Invalid(err error) error { return &StatusError{http.StatusBadRequest, err} }

// Refused wraps err as a conflict (409): the request is well formed but
// the arrays' or devices' state refuses it (member in use, last copy,
// number taken, ...).
func Refused(err error) error { return &StatusError{http.StatusConflict, err} }

// statusOf is the HTTP status for err.
func statusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return http.StatusInternalServerError
}

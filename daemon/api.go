package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// APIVersion is the path prefix of every endpoint; a change that breaks
// clients gets a new prefix.
const APIVersion = "/v1"

// AddRequest is the body of POST /v1/arrays: create a new array over
// Members or assemble the one their superblocks describe.
type AddRequest struct {
	// Members are member block devices or files, in role order for a new
	// array.
	Members []string `json:"members"`
	// Level is "0", "1" or "10" ("raid0", "raid1", "raid10" accepted) for a
	// new array; "" only assembles (the members must carry superblocks).
	Level string `json:"level,omitempty"`
	// Layout is the raid10 layout: n2 (default), f2, o2, n3, f3, o3.
	Layout string `json:"layout,omitempty"`
	// ChunkBytes is the chunk size of a new array: a power of two from
	// 4 KiB to 64 MiB; 0 means 512 KiB.
	ChunkBytes uint64 `json:"chunk_bytes,omitempty"`
	// Name is the array name stored in the superblocks (up to 32 bytes).
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
	// BitmapRegionBytes is its region size (0: from the array size);
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
	// Force, at assembly, starts the array from the members given even
	// when they disagree about each other (a split brain: each ran
	// without the other) or the freshest records itself failed: the
	// freshest is authoritative and the others are fully rebuilt from it.
	Force bool `json:"force,omitempty"`
}

// Spec validates the request's array parameters (no device is touched).
func (r AddRequest) Spec() (array.CreateSpec, error) {
	var s array.CreateSpec
	s.Name = r.Name
	if len(r.Members) == 0 {
		return s, errors.New("members: at least one member is needed")
	}
	if len(r.Name) > 32 {
		return s, fmt.Errorf("name %q: at most 32 bytes", r.Name)
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
	default:
		return s, fmt.Errorf("level %q: want 0, 1 or 10", r.Level)
	}
	if r.Layout != "" {
		if s.Level != engine.Level10 {
			return s, errors.New("layout is for raid10 only")
		}
		l, err := engine.ParseLayout(r.Layout)
		if err != nil {
			return s, fmt.Errorf("layout: %w", err)
		}
		s.Layout = l
	} else if s.Level == engine.Level10 {
		s.Layout = engine.LayoutN2
	}
	chunk := r.ChunkBytes
	if chunk == 0 {
		chunk = 512 << 10
	}
	if chunk < 4096 || chunk > 64<<20 || chunk&(chunk-1) != 0 {
		return s, fmt.Errorf("chunk_bytes %d: must be a power of two from 4K to 64M", r.ChunkBytes)
	}
	s.ChunkSectors = chunk >> 9
	if s.Level >= 0 {
		g := engine.Geometry{Level: s.Level, Members: len(r.Members), Layout: s.Layout, ChunkSectors: s.ChunkSectors,
			MemberSectors: engine.MaxMemberSectors}
		if err := g.Validate(); err != nil {
			return s, err
		}
	}
	for i, sp := range r.Spares {
		if slices.Contains(r.Members, sp) || slices.Contains(r.Spares[:i], sp) {
			return s, fmt.Errorf("spare %s: given twice", sp)
		}
		if s.Level == engine.Level0 {
			return s, errors.New("spares: raid0 has no redundancy to rebuild")
		}
	}
	s.Spares = r.Spares
	s.Force = r.Force
	for _, w := range r.WriteMostly {
		if !slices.Contains(r.Members, w) {
			return s, fmt.Errorf("write_mostly %s: not one of the members", w)
		}
		if s.Level == engine.Level0 {
			return s, errors.New("write_mostly: raid0 has a single copy of everything")
		}
	}
	s.NoBitmap, s.AssumeClean = r.NoBitmap, r.AssumeClean
	if rb := r.BitmapRegionBytes; rb != 0 {
		if r.NoBitmap {
			return s, errors.New("bitmap_region_bytes and no_bitmap contradict each other")
		}
		if rb < 64<<10 || rb&(rb-1) != 0 {
			return s, fmt.Errorf("bitmap_region_bytes %d: must be a power of two of at least 64K", rb)
		}
		s.RegionSectors = rb >> 9
	}
	if r.SyncMaxBytes != 0 && r.SyncMinBytes > r.SyncMaxBytes {
		return s, errors.New("sync_speed_min_bytes is above sync_speed_max_bytes")
	}
	s.SyncMinBytes, s.SyncMaxBytes = r.SyncMinBytes, r.SyncMaxBytes
	switch {
	case r.Number != nil && (*r.Number < -1 || *r.Number >= 1<<20):
		return s, fmt.Errorf("number %d: must be -1 or a device number", *r.Number)
	case r.Queues < 0 || r.Queues > 4096:
		return s, fmt.Errorf("queues %d: must be 0..4096", r.Queues)
	case r.Depth < 0 || r.Depth > 4096:
		return s, fmt.Errorf("depth %d: must be 0..4096", r.Depth)
	case r.MaxIOBytes < 0 || r.MaxIOBytes%4096 != 0 || r.MaxIOBytes > 32<<20:
		return s, fmt.Errorf("max_io_bytes %d: must be a multiple of 4K up to 32M", r.MaxIOBytes)
	}
	return s, nil
}

// MemberRequest is the body of POST /v1/arrays/{n}/{fail,remove,re-add,replace}.
type MemberRequest struct {
	// Member is the member's path as given when the array was added, or
	// its role number ("0", "1", ...).
	Member string `json:"member"`
	// With is, for replace, the new member that takes over (optional: a
	// spare otherwise).
	With string `json:"with,omitempty"`
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
	// some role not in sync) or "failed" (some data has no copy).
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

// arrayFromStatus fills the API view of an array from its status.
func arrayFromStatus(n int, s array.Status) Array {
	a := Array{Number: n, Device: DevicePath(n), Name: s.Name, UUID: s.UUID, Level: s.Level, Layout: s.Layout,
		ChunkBytes: s.ChunkBytes, SizeBytes: s.SizeBytes, State: s.State, Degraded: s.Degraded, RaidDisks: s.RaidDisks,
		ActiveDisks: s.ActiveDisks, FailedDisks: s.FailedDisks, MissingDisks: s.MissingDisks, Events: s.Events,
		Members: []Member{}, SpareDisks: len(s.Spares), Spares: append([]string{}, s.Spares...)}
	for _, m := range s.Members {
		a.Members = append(a.Members, Member{Role: m.Role, Path: m.Path, State: m.State, RebuildOffsetBytes: m.RebuildOffset})
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

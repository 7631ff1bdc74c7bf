// Package daemon is `ublk-raid serve`: one process hosting every
// ublk-raid array of the machine, managed over a control socket.
//
// # Pieces
//
//   - Run wires everything: the ublk control device, the control socket
//     (Listen), the Manager, the control API (NewHandler), the Prometheus
//     endpoint (metrics.Handler over the Manager as metrics.Source) and
//     systemd notification (Notify).
//   - Backend is what the API operates on; Manager is the real one
//     (array.Open + ublk.Create per array), daemontest.Backend a fake for
//     tests without root or a kernel.
//   - Client is the CLI's side of the socket.
//
// # Threads and lifetimes
//
// HTTP handlers run on net/http's goroutines and call the Backend
// concurrently. The Manager guards its table of arrays with one mutex held
// only for map operations, never across kernel commands or superblock
// writes; Add is serialised (device numbers), member operations on one
// array are serialised by that array's lock. I/O never passes through this
// package: each device's queue threads belong to package ublk, and the
// Manager only calls array.Array's control methods (Status, Fail, Remove,
// SetClean), which are safe from any goroutine.
//
// An array is owned by the Manager from Add (or Restore) until Delete,
// Shutdown, or its device being stopped from outside (a kernel-level
// delete, which a watcher goroutine notices: the array is then marked
// clean and closed). Member failures are logged once per member with
// structured fields (device, array, uuid, role, member).
//
// # Control socket and API
//
// The socket (default /run/ublk-raid/control.sock) is created 0600 in a
// directory made 0700 if it did not exist: only root talks to the daemon.
// A socket file nobody answers on (a dead daemon's) is replaced; if a
// daemon answers, Run fails ("another ublk-raid daemon is listening").
// The API is HTTP/1.1 with JSON bodies, so `curl --unix-socket
// /run/ublk-raid/control.sock http://x/v1/arrays` works:
//
//	GET    /v1/arrays               200 {"arrays": [Array...]}
//	POST   /v1/arrays               201 Array          body AddRequest
//	DELETE /v1/arrays               200 DeleteResult   (every array)
//	GET    /v1/arrays/{n}           200 Array
//	DELETE /v1/arrays/{n}           200 DeleteResult
//	POST   /v1/arrays/{n}/fail      200 Array          body MemberRequest
//	POST   /v1/arrays/{n}/remove    200 Array          body MemberRequest
//	POST   /v1/arrays/{n}/re-add    200 Array          body MemberRequest
//	POST   /v1/arrays/{n}/add-spare 200 Array          body MemberRequest
//	POST   /v1/arrays/{n}/replace   200 Array          body MemberRequest (+ "with")
//	POST   /v1/arrays/{n}/check     200 Array
//	POST   /v1/arrays/{n}/repair    200 Array
//	POST   /v1/arrays/{n}/grow      200 Array          body GrowRequest
//	GET    /v1/version              200 {"version": "..."}
//
// AddRequest:
//
//	{"members": ["/dev/vdc", "/dev/vdd"],   required; role order for a new array
//	 "level": "1",                          "0" | "1" | "10" ("raidN" too); omitted: assemble only
//	 "layout": "n2",                        raid10 only: n2 f2 o2 n3 f3 o3
//	 "chunk_bytes": 524288,                 power of two, 4K..64M; 0/omitted: 512K
//	 "name": "tank",                        up to 32 bytes of UTF-8 text, no control characters
//	 "number": 0,                           N of /dev/ublkbN; omitted or -1: first free
//	 "queues": 0, "depth": 0,               0: defaults (one queue per CPU up to 8; 128)
//	 "max_io_bytes": 0,                     0: 512K
//	 "spares": ["/dev/vde"],                raid1/10: held as spares
//	 "write_mostly": [], "no_bitmap": false, "bitmap_region_bytes": 0,
//	 "assume_clean": false, "sync_speed_min_bytes": 0, "sync_speed_max_bytes": 0,
//	 "force": false}                        overwrite members/blank spares that hold data;
//	                                        assembly: start members that disagree (split brain) from the freshest,
//	                                        and a raid5/6 dirty degraded array whose write-hole log cannot replay
//
// A numeric field that is 0 or omitted takes its default (bitmap_region_bytes:
// from the array size; sync speeds: 1000 KiB/s and no limit). The same
// device given twice (members and spares, under any path) is refused, and
// so is a relative path (400): the daemon would resolve it against its own
// working directory, not the client's.
//
// A body is one JSON object in UTF-8 and nothing after it but white space;
// unknown fields, fields not spelled exactly as here (encoding/json would
// take "Level") and fields given twice are refused (400) before anything
// is done, so a typo is not silently ignored. check and repair take no
// body: one that holds anything but white space is refused (400).
//
// GrowRequest: {"size_bytes": 0}: each member's new data area (md's
// component size; the array's size for raid1), rounded down to 4 KiB
// (raid5/6: to the chunk); 0
// is the most every member allows (mdadm --grow --size=max). The same
// size again answers 200 and changes nothing; 1 to 4095 is 400; a refusal (raid0, raid10
// far, degraded, a job running or pending, a member or spare too
// small, a shrink, a device without UBLK_F_UPDATE_SIZE) is 409 with
// nothing written. The grow hands the device over in-process as after a
// daemon crash (requests wait in the kernel, then are reissued) and ends
// with UBLK_U_CMD_UPDATE_SIZE.
//
// MemberRequest: {"member": "/dev/vdd"} (a role number such as "1", or
// an absolute path: any path to the member's device or file, compared
// as for a device given twice; for add-spare the new device); replace
// also takes "with": the new member (omitted: the first spare). add-spare
// and replace take "force": true to overwrite a new device that holds
// data or another array's superblock (otherwise refused, 409, nothing
// written). add-spare takes several devices as "members": ["/dev/vde",
// "/dev/vdf"] instead of "member": every one is checked (in use, size,
// superblocks, signatures, given twice) before any is written, so a
// refusal adds none (`add -n N --spare A --spare B` sends one such
// request). A relative path, "with" on another operation than replace,
// "force" on fail, remove or re-add, and "members" on another operation
// than add-spare are refused (400).
//
// Array (the answer of add, detail, fail, remove; the elements of list):
//
//	{"number": 0, "device": "/dev/ublkb0", "name": "tank", "uuid": "…",
//	 "level": "raid1", "layout": "",              layout only for raid10
//	 "chunk_bytes": 524288, "size_bytes": 535822336,
//	 "state": "active",                           active | degraded | failed
//	 "degraded": false, "raid_disks": 2, "active_disks": 2,
//	 "failed_disks": 0, "missing_disks": 0, "spare_disks": 1, "events": 3,
//	 "spares": ["/dev/vde"],                      devices standing by
//	 "members": [{"role": 0, "path": "/dev/vdc", "state": "active"},
//	             {"role": 1, "path": "/dev/vdd", "state": "faulty"}],
//	                                              member state: active | rebuilding | faulty | missing;
//	                                              rebuilding members add "rebuild_offset_bytes"
//	 "queues": 2, "depth": 128,
//	 "created": true, "recovered": false,        created by this daemon / re-attached by user recovery
//	 "since": "2026-01-02T15:04:05Z",
//	 "warnings": ["largest member …"]}            add, add-spare, remove, re-add, replace: when there is something to tell
//	                                              (a state file not written: the change is done, a restart would not see it)
//
// DeleteResult: {"deleted": ["/dev/ublkb0"], "forgotten": [3]} (forgotten:
// state entries of arrays that had not started, now dropped).
//
// Errors: {"error": "one line"} with 400 (malformed request), 404 (no such
// array, member or endpoint), 405 (method; with an Allow header), 409 (refused by the state of
// the array or device: member in use, last copy, device mounted, number
// taken, device holding data), 501 (not available yet), 500 (anything else). Fields are only
// ever added to these objects; a change that breaks clients gets /v2.
//
// # State file and restart
//
// The state file (default /var/lib/ublk-raid/arrays.json, replaced
// atomically: temporary file, fsync, rename, fsync of the directory) lists
// each array's device number, UUID, member paths, queue settings and sync speed bounds. It is
// the daemon's equivalent of mdadm.conf's ARRAY lines: add puts an entry
// in (before it creates the device, so that a daemon dying in between
// leaves no device the file does not name), del takes it out; remove drops the removed member's path, add-spare
// and replace add the new one (spares are members for the file). add-spare,
// re-add and replace first record the device as joining, before any
// superblock names it: a daemon dying before the member list names it
// leaves it there, and the next start assembles with it if its superblock
// names the array and the members' freshest superblock names it in a role
// or as a spare (the operation's update reached them: a replacement
// resumes); the rest is forgotten (one that cannot be read, with a
// warning to re-add it). Stopping
// the daemon keeps the entries. An array started from its entry (at serve's
// start, or a retry) rewrites the entry's member list to what the array
// holds: its members, spares, failed members left closed and absent paths;
// a device it let go of (removed or replaced by a daemon that died before
// its state file write) is dropped. remove of a path the entry still lists
// but the array does not hold drops it from the entry and succeeds, as
// mdadm's remove of a device already removed.
//
// When serve starts, for each entry:
//   - if /dev/ublkbN still exists (GET_DEV_INFO answers) and is quiesced
//     or live without its server — the previous daemon died or left it on
//     purpose — the array is assembled from the members' superblocks
//     (assemble only, never create; the UUID and the device size must
//     match) and re-attached with user recovery (ublk.Recover): I/O that
//     waited completes, and the device's users see no error;
//   - if the device is gone (a reboot, or the daemon deleted it on a clean
//     stop), the array is assembled afresh at the same number, so arrays
//     come back after a reboot like md arrays listed in mdadm.conf;
//   - a device stopped but not deleted is deleted and assembled afresh.
//
// A member path that is absent (no such file, or its device gone), or
// whose device holds no superblock of the array (blank: a new disk in the
// failed one's slot; another array's; unreadable), is left
// out of the assembly when the superblocks present record it failed,
// missing, rebuilding or spare — a failed disk pulled before `remove` —
// so the array starts degraded, as md's assembly does without a failed
// member; an absent member they record active may hold the freshest data,
// and keeps the array pending (array.CreateSpec.SkipAbsent), as does a
// role recorded active whose device is not among the entry's members
// (array.CreateSpec.AsRecorded). An array is served at one number only:
// Add and restore refuse the members of an array served, or pending, at
// another (array.CreateSpec.Taken).
//
// An entry that cannot be started (members missing, in use, of another
// array) is logged and kept ("pending"): it is retried every 2 s for the
// first minute (members appear as udev coldplugs them; READY=1 does not
// wait for them), its number stays reserved, and `del -n N` forgets it
// and deletes the device a dead server left waiting for its recovery
// (refused, the entry kept, while that device is mounted or held). A del
// of a served array whose stop the kernel refuses (any error but ENODEV
// from STOP_DEV/TRY_STOP_DEV besides EBUSY: the driver's stop itself
// cannot fail, so the control path refused it and nothing was stopped)
// answers that error (500: the kernel's, not the array's state) and
// changes nothing: the array stays served, its members and the state
// file as they were; another del may try again (one while the first is
// under way is refused, 409). A
// corrupt state file stops serve before anything is touched; it is never
// overwritten. It must be a regular file of at most 16 MiB whose entries
// each name their device number. An entry a restart cannot serve as
// written (a relative member path, queue settings add refuses, a device
// at its number that this server cannot re-attach) stays pending, its
// members untouched; a member listed twice under two paths is opened
// once.
//
// # Stopping
//
// On SIGTERM or SIGINT the daemon stops serving the API and metrics, then:
//   - by default it deletes each device that is not in use and marks its
//     array clean (the members are consistent, as after mdadm --stop);
//     a device in use — on 7.0+ drivers any opener (the kernel refuses
//     TRY_STOP_DEV), on older ones an exclusive open fails: mounted, or
//     held by device-mapper, md or LVM — is left for the next daemon to
//     recover, because deleting it would fail its users' I/O; so is one
//     whose stop the kernel refuses otherwise (ublk.ErrNotStopped), its
//     array left dirty, not marked clean under the device still served;
//   - with --keep-devices it leaves every device for recovery.
//
// A device left for the next daemon keeps its users: the daemon's exit
// aborts the requests in flight and the next daemon's recovery reissues
// them (USER_RECOVERY_REISSUE), so they see no error (scenario
// live-upgrade: three restarts under fio on a mounted ext4). UBLK_F_QUIESCE
// (6.16+), which would let the requests in flight complete first, is not
// used: a quiesced hand-over left requests stuck in the 7.3 kernel after
// the next daemon's recovery, once in three.
//
// So `systemctl restart ublk-raid` is safe: mounted arrays stay and the new
// daemon re-attaches, unused ones are deleted cleanly and assembled again.
// At shutdown the unit is stopped after local filesystems are unmounted, so
// every array is deleted cleanly. After a crash (kill -9, OOM; the unit
// restarts on failure) the devices are quiesced with their I/O waiting,
// and the next daemon recovers them. (Before 7.0 a plain open, e.g. fio
// on the raw device, is not seen as in use: stop such users first, or use
// --keep-devices.)
//
// # systemd
//
// With $NOTIFY_SOCKET set (Type=notify), Run sends READY=1 once the state
// file's arrays are started and the socket serves, STATUS= lines as arrays
// come and go, and STOPPING=1 on the way out; without cgo (Notify).
package daemon

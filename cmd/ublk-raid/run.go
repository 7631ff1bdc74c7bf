package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

type runOptions struct {
	serve         serveOptions
	level         string
	layout        string
	chunk         string
	name          string
	recover       bool
	members       []string
	memberTimeout time.Duration
	// bitmap and sync policy
	noBitmap    bool
	region      string
	assumeClean bool
	syncMin     string
	syncMax     string
	// writeMostly: members read only when no other copy can serve.
	writeMostly []string
	spares      []string
	cpuProfile  string
	// force: overwrite devices carrying signatures of data; at assembly,
	// start members that disagree from the freshest.
	force bool
	// changed tells whether a flag (by long name) was on the command line
	// (cobra's Changed; nil: none was). A chunk is sent only when --chunk
	// was: an assembly, which takes the superblocks' chunk, refuses one,
	// and a new array otherwise gets the daemon's default.
	changed func(name string) bool
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func newRunCmd(logLevel *string) *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run --level 0|1|10 [--layout n2|f2|o2|n3|f3|o3] [--chunk SIZE] MEMBER...",
		Short: "Create or assemble a RAID array and serve it as /dev/ublkbN (foreground)",
		Long: "Assembles the array the members' superblocks describe or, when none has one, creates a new array\n" +
			"(--level is then required). Prints the device path once it is live and serves it until it is deleted\n" +
			"(ublk-raid del) or this process gets SIGINT/SIGTERM; either way the array is marked clean.\n" +
			"If the process dies, `ublk-raid run --recover -n N MEMBER...` re-attaches without I/O errors.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("run needs at least one member")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Absolute paths, as add sends: the same request rules apply.
			var err error
			o.changed = cmd.Flags().Changed
			if err := o.checkRecover(); err != nil {
				return err
			}
			o.members = args
			for _, ps := range []*[]string{&o.members, &o.spares, &o.writeMostly} {
				if *ps, err = absPaths(*ps); err != nil {
					return err
				}
			}
			spec, err := o.spec()
			if err != nil {
				return err
			}
			spec.Force = o.force
			if o.recover && o.serve.number < 0 {
				return usagef("--recover needs -n N, the device to re-attach")
			}
			cfg, err := o.serve.config()
			if err != nil {
				return err
			}
			log, err := newLogger(*logLevel, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer log.Sync()
			if o.cpuProfile != "" {
				stop, err := startCPUProfile(o.cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runArray(o, spec, cfg, cmd.OutOrStdout(), log)
		},
	}
	o.serve.addFlags(c)
	c.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the server to FILE (development)")
	_ = c.Flags().MarkHidden("cpuprofile")
	c.Flags().StringVarP(&o.level, "level", "l", "", "RAID level for a new array: 0, 1, 10, 5 or 6")
	c.Flags().StringVar(&o.layout, "layout", "", "raid10 layout: n2 (default), f2, o2, n3, f3, o3; raid5/6: ls (default), rs, la, ra")
	c.Flags().StringVarP(&o.chunk, "chunk", "c", "512K", "chunk size for a new array: power of two, 4K..64M")
	c.Flags().StringVar(&o.name, "name", "", "array name (up to 32 bytes)")
	c.Flags().BoolVar(&o.recover, "recover", false, "re-attach to device -n N whose server died (it keeps its own queues, depth and largest request: -q, -d and --max-io are not used)")
	o.addBitmapFlags(c)
	c.Flags().DurationVar(&o.memberTimeout, "member-timeout", defaultMemberTimeout, "fail a member whose I/O takes longer than this (0: never)")
	c.Flags().StringArrayVar(&o.writeMostly, "write-mostly", nil,
		"MEMBER (one of the members given) is read only when no other copy can serve (repeatable; raid1, 10, 5 and 6)")
	c.Flags().StringArrayVar(&o.spares, "spare", nil, "hold DEVICE as a spare that takes a failed member's role (repeatable; raid1, 10, 5 and 6)")
	c.Flags().BoolVar(&o.force, "force", false, forceUsage+forceAssembleUsage)
	return c
}

// defaultMemberTimeout is the member I/O timeout (like the SCSI disk
// command timeout).
const defaultMemberTimeout = 30 * time.Second

// given tells whether flag name was on the command line.
func (o *runOptions) given(name string) bool { return o.changed != nil && o.changed(name) }

// checkRecover refuses, with --recover, the flags that create an array:
// a recovery re-attaches the device of an array that exists and must
// never create one (array.Open would write new superblocks on blank
// members before the device is checked).
func (o *runOptions) checkRecover() error {
	if !o.recover {
		return nil
	}
	for _, f := range []string{"level", "layout", "chunk", "no-bitmap", "bitmap-region", "assume-clean"} {
		if o.given(f) {
			return usagef("--%s creates an array: --recover re-attaches the device of one that exists", f)
		}
	}
	return nil
}

// addBitmapFlags adds the bitmap and sync speed flags (run and add).
func (o *runOptions) addBitmapFlags(c *cobra.Command) {
	c.Flags().BoolVar(&o.noBitmap, "no-bitmap", false, "create the array without a write-intent bitmap (then an unclean stop needs a full check)")
	c.Flags().StringVar(&o.region, "bitmap-region", "", "bitmap region size for a new array: power of two, at least 64K (default: from the array size)")
	c.Flags().BoolVar(&o.assumeClean, "assume-clean", false, "new array: the members are known equal (zeroed): no initial sync, every region in sync (like mdadm --assume-clean)")
	c.Flags().StringVar(&o.syncMin, "sync-speed-min", "1000K", "rebuild/resync/check speed that is kept even under user I/O, per second (as md; left out, it is lowered to a smaller --sync-speed-max)")
	c.Flags().StringVar(&o.syncMax, "sync-speed-max", "0", "rebuild/resync/check speed limit per second (0: none)")
}

// request parses the creation flags into the daemon's request (sizes in
// bytes), touching no device. An explicit 0 for --chunk or
// --bitmap-region is refused: in the request 0 means the default, which
// is what leaving the flag out asks for.
func (o *runOptions) request() (daemon.AddRequest, error) {
	req := daemon.AddRequest{Members: o.members, Level: o.level, Layout: o.layout, Name: o.name,
		NoBitmap: o.noBitmap, AssumeClean: o.assumeClean, WriteMostly: o.writeMostly, Spares: o.spares,
		Force: o.force}
	if o.given("chunk") {
		chunk, err := parseSize(o.chunk)
		if err != nil {
			return req, usagef("--chunk: %v", err)
		}
		if chunk == 0 {
			return req, usagef("--chunk %s: must be a power of two from 4K to 64M (leave it out for 512K)", o.chunk)
		}
		req.ChunkBytes = uint64(chunk)
	}
	if o.region != "" {
		r, err := parseSize(o.region)
		if err != nil {
			return req, usagef("--bitmap-region: %v", err)
		}
		if r == 0 {
			return req, usagef("--bitmap-region %s: must be a power of two of at least 64K (leave it out to size it from the array)", o.region)
		}
		req.BitmapRegionBytes = uint64(r)
	}
	for _, f := range []struct {
		name, v string
		dst     *uint64
	}{{"--sync-speed-min", o.syncMin, &req.SyncMinBytes}, {"--sync-speed-max", o.syncMax, &req.SyncMaxBytes}} {
		if !o.given(f.name[2:]) {
			// The default (0 in the request): md's 1000K minimum, which
			// a smaller maximum lowers, as md's sync_speed_max alone
			// does (only a minimum given above the maximum is refused).
			continue
		}
		n, err := parseSize(f.v)
		if err != nil {
			return req, usagef("%s: %v", f.name, err)
		}
		*f.dst = uint64(n)
	}
	if o.memberTimeout < 0 || (o.memberTimeout > 0 && o.memberTimeout < 2*time.Second) {
		return req, usagef("--member-timeout %v: 0 (never) or at least 2s", o.memberTimeout)
	}
	return req, nil
}

// spec validates the creation flags (without touching any device) with
// the daemon's own rules, so run and add accept the same arrays.
func (o *runOptions) spec() (array.CreateSpec, error) {
	req, err := o.request()
	if err != nil {
		return array.CreateSpec{}, err
	}
	s, err := req.Spec()
	if err != nil {
		return s, o.specUsage(err)
	}
	if s.Level == engine.Level0 {
		// raid0 has no resync, rebuild or check to pace. Checked here, not
		// by the daemon: the request carries the flags' defaults too.
		for _, f := range []string{"sync-speed-min", "sync-speed-max"} {
			if o.given(f) {
				return s, usagef("--%s: raid0 has nothing to resync, rebuild or check (no redundancy)", f)
			}
		}
	}
	return s, nil
}

// requestFlags names the daemon.AddRequest fields (JSON names) as this
// command's flags.
var requestFlags = map[string]string{
	"members": "members", "level": "--level", "layout": "--layout", "chunk_bytes": "--chunk", "name": "--name",
	"number": "--number", "queues": "--queues", "depth": "--depth", "max_io_bytes": "--max-io",
	"write_mostly": "--write-mostly", "no_bitmap": "--no-bitmap", "bitmap_region_bytes": "--bitmap-region",
	"assume_clean": "--assume-clean", "sync_speed_min_bytes": "--sync-speed-min",
	"sync_speed_max_bytes": "--sync-speed-max", "spares": "--spare", "force": "--force",
}

// flagName is the flag of request field f.
func flagName(f string) string {
	if n, ok := requestFlags[f]; ok {
		return n
	}
	return "--" + strings.ReplaceAll(f, "_", "-")
}

// specUsage is a daemon.AddRequest.Spec error as a usage error that names
// the flags, and the sizes as they were given.
func (o *runOptions) specUsage(err error) error {
	var fe *daemon.FieldError
	if !errors.As(err, &fe) {
		return usageError{err}
	}
	e := *fe
	given := map[string]string{"chunk_bytes": o.chunk, "bitmap_region_bytes": o.region,
		"sync_speed_min_bytes": o.syncMin, "sync_speed_max_bytes": o.syncMax, "max_io_bytes": o.serve.maxIO}
	if v, ok := given[e.Field]; ok && e.Value != "" && v != "" {
		e.Value = v
	}
	return usageError{errors.New(e.Message(flagName))}
}

func runArray(o runOptions, spec array.CreateSpec, cfg ublk.Config, stdout io.Writer, log *zap.Logger) (rerr error) {
	ctrl, err := ublk.OpenControl()
	if err != nil {
		return err
	}
	defer ctrl.Close()
	// Checked before a new array's superblocks are written: neither a
	// feature the driver lacks (--batch-io before 7.0) nor a number in
	// use may refuse the device after that.
	feats, err := ctrl.Features()
	if err != nil {
		return err
	}
	if err := ublk.CheckFeatures(feats, cfg); err != nil {
		return err
	}
	if n := o.serve.number; n >= 0 && !o.recover {
		if exists, err := ctrl.Exists(uint32(n)); err != nil {
			return err
		} else if exists {
			return fmt.Errorf("%s exists already: `ublk-raid list`", daemon.DevicePath(n))
		}
	}
	if o.recover {
		// Before the assembly, which may write the members (a raid5/6
		// write-hole log replay, a blank spare's superblock): a recovery
		// of a device that is not there, or does not wait for one, leaves
		// them as they were. What depends on the array (its size, zero
		// copy) is checked once it is open, before the dirty mark.
		if err := ublk.CheckRecoverDevice(ctrl, uint32(o.serve.number)); err != nil {
			return err
		}
	}
	if !o.recover {
		// A raid5/6 write-hole log too small for the queues or the I/O
		// size is refused before anything is written.
		n := cfg.Normalized()
		spec.Queues, spec.MaxIOBytes = n.Queues, n.MaxIOBytes
	}
	prepareProcess(log)
	spec.Undoable = true // undone if its device is refused (below)
	a, err := busyRetry(o.recover, func() (*array.Array, error) { return openArray(o.members, spec) })
	if err != nil {
		return err
	}
	served := false
	defer func() {
		if !served && a.Created {
			// Refused before its device served it: the new array's
			// creation is undone, as the daemon's add does.
			if err := a.CloseUndoCreated(); err != nil {
				rerr = fmt.Errorf("%w; the members may hold part of the new array: %w", rerr, err)
			} else if rerr != nil {
				rerr = fmt.Errorf("%w (the members are as they were)", rerr)
			}
			return
		}
		a.Close()
	}()
	for _, w := range a.Warnings {
		log.Warn(w)
	}
	st := a.Status()
	log.Info("array open", zap.String("level", st.Level), zap.Int("members", st.RaidDisks),
		zap.String("layout", st.Layout), zap.Uint64("chunk_bytes", st.ChunkBytes),
		zap.Uint64("size_bytes", st.SizeBytes), zap.Bool("created", a.Created), zap.Bool("degraded", a.Degraded()))
	a.Configure(func() {
		a.OnMemberFailed = func(role int, path string) {
			log.Error("member failed", zap.Int("role", role), zap.String("member", path), zap.Bool("degraded", true))
		}
		a.MemberTimeout = o.memberTimeout
	})
	logBitmap(log, a)
	a.SetSyncLog(daemon.SyncLog(log))
	if o.recover {
		// Refused before the dirty mark is written: a device this
		// array cannot serve leaves the members as they were.
		if err := ublk.CheckRecover(ctrl, uint32(o.serve.number), a); err != nil {
			return err
		}
	}
	if err := a.SetClean(false); err != nil {
		return err
	}
	cfg.Params = a.Params()
	var d *ublk.Device
	if o.recover {
		d, err = ublk.Recover(ctrl, uint32(o.serve.number), a, cfg)
	} else {
		d, err = ublk.Create(ctrl, a, cfg)
	}
	if err != nil {
		if !a.Created {
			a.SetClean(true)
		}
		return err
	}
	served = true
	a.KeepCreated()
	if w := queuesWarning(o.serve.queues, int(d.Info().NrHwQueues)); w != "" {
		log.Warn(w)
	}
	log.Info("device live", zap.String("device", d.BlockPath()), zap.Strings("members", o.members),
		zap.Int("queues", int(d.Info().NrHwQueues)), zap.Bool("recovered", o.recover))
	fmt.Fprintln(stdout, d.BlockPath())
	a.StartBackground()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	return serveUntilEnd(d, a, sig, log)
}

// serveUntilEnd waits for a signal, which deletes the device, or for the
// device's end, then marks the array clean: only once nothing serves it.
// A device whose stop the kernel refuses, or whose queues failed, is left
// (when this process exits) to a recovery, its array dirty.
func serveUntilEnd(d *ublk.Device, a *array.Array, sig <-chan os.Signal, log *zap.Logger) error {
	var serr error
	select {
	case s := <-sig:
		log.Info("signal: deleting device", zap.String("signal", s.String()), zap.String("device", d.BlockPath()))
		serr = d.Delete()
		if errors.Is(serr, ublk.ErrNotStopped) {
			// Still served until this process exits, after which the
			// device waits for a recovery as after a crash: the array
			// is not marked clean under its writes.
			a.StopSync()
			return fmt.Errorf("%s: %w: `ublk-raid run --recover -n %d` with the same members serves it again", d.BlockPath(), serr, d.ID())
		}
	case <-d.Done():
		if d.Failed() {
			// As after a crash of this process: the device waits, with
			// its users' requests, for a recovery; the array stays dirty.
			a.StopSync()
			log.Error("the device's queues failed: it waits for `ublk-raid run --recover`", zap.String("device", d.BlockPath()), zap.Error(d.Err()))
			return fmt.Errorf("%s: the queues failed (%w): `ublk-raid run --recover -n %d` with the same members serves it again", d.BlockPath(), d.Err(), d.ID())
		}
		serr = d.Stop()
		if errors.Is(serr, unix.ENODEV) {
			serr = nil
		}
	}
	a.StopSync() // checkpointed: a rebuild or resync resumes at the next assembly
	if b := a.Metrics("").Bitmap; b != nil {
		log.Info("bitmap stats", zap.Uint64("regions", b.Regions), zap.Uint64("dirty_regions", b.DirtyRegions),
			zap.Uint64("data_writes", b.DataWrites), zap.Uint64("block_writes", b.BlockWrites), zap.Uint64("waited", b.Waited))
	}
	if err := a.SetClean(true); err != nil {
		return errors.Join(serr, err)
	}
	log.Info("array stopped cleanly", zap.String("device", d.BlockPath()))
	return serr
}

// openArray opens (assembles or creates) the array; with spec.Level < 0
// it only assembles.
func openArray(members []string, spec array.CreateSpec) (*array.Array, error) {
	a, err := array.Open(members, spec, spec.Level >= 0)
	if err != nil {
		return nil, err
	}
	if spec.Level >= 0 && !a.Created && a.Engine.Level() != spec.Level {
		a.Close()
		return nil, fmt.Errorf("the members hold a %s array; --level %d would create a new one: wipe them first", a.Engine.Level(), spec.Level)
	}
	return a, nil
}

// logBitmap says what assembly found in the write-intent bitmap.
func logBitmap(log *zap.Logger, a *array.Array) {
	bm := a.Bitmap
	if bm == nil {
		return
	}
	g := bm.Geometry()
	f := []zap.Field{zap.Int("regions", g.Regions), zap.Uint64("region_bytes", g.RegionSectors<<9)}
	if info := a.BitmapInfo; info != nil {
		f = append(f, zap.Int("dirty_regions", info.Dirty), zap.Int("never_written_regions", info.NeverWritten))
		if info.AllDirty {
			log.Warn("bitmap unusable: every region dirty", append(f, zap.Error(info.Err))...)
			return
		}
	}
	log.Info("bitmap", f...)

}

// recoverBusyWait bounds busyRetry.
const recoverBusyWait = 10 * time.Second

// busyRetry calls open; for a recovery, again until it does not fail
// with EBUSY, for at most recoverBusyWait. A recovery comes right after its server died, and the
// dead server's io_uring rings release the member files they registered
// from a kernel work item, a moment after the process is gone: until then
// an exclusive open of a member fails with EBUSY. (The daemon waits the
// same way when it assembles.)
func busyRetry[T any](recovery bool, open func() (T, error)) (T, error) {
	deadline := time.Now().Add(recoverBusyWait)
	for {
		v, err := open()
		if !recovery || err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

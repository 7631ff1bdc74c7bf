package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// exitStatus is an error that only sets the exit code (detail --test);
// main prints nothing for it.
type exitStatus int

func (e exitStatus) Error() string { return "" }

// Exit codes of detail --test (mdadm's).
const (
	testDegraded = 1
	testFailed   = 2
	testError    = 4
)

// ---- serve

type serveDaemonOptions struct {
	metricsListen string
	stateFile     string
	keepDevices   bool
	noPin         bool
	cpus          string
	noFixed       bool
	noZC          bool
	batchIO       bool
	defer_        bool
	poll          time.Duration
	memberTimeout time.Duration
	sched         string
}

func newServeCmd(logLevel, socket *string) *cobra.Command {
	var o serveDaemonOptions
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon that hosts every ublk-raid array of the machine",
		Long: "Listens on the control socket (--socket) for the other commands, serves Prometheus metrics on\n" +
			"--metrics-listen, and starts the arrays of the state file: devices whose previous daemon died are\n" +
			"re-attached (user recovery, no I/O error), the others assembled again. On SIGTERM/SIGINT it deletes\n" +
			"the devices not in use and marks their arrays clean; devices in use (mounted) are left for the next\n" +
			"serve to recover, and --keep-devices leaves them all. Tells systemd READY=1 (Type=notify).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			qo, err := o.validate()
			if err != nil {
				return err
			}
			log, err := newLogger(*logLevel, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer log.Sync()
			return runServe(daemon.Config{Socket: *socket, MetricsListen: o.metricsListen, StateFile: o.stateFile,
				KeepDevices: o.keepDevices, Queue: qo, Version: version, Log: log})
		},
	}
	c.Flags().StringVar(&o.metricsListen, "metrics-listen", daemon.DefaultMetricsListen, "host:port of the Prometheus /metrics endpoint (empty: none)")
	c.Flags().StringVar(&o.stateFile, "state-file", daemon.DefaultStateFile, "where the daemon records its arrays (empty: nowhere)")
	c.Flags().BoolVar(&o.keepDevices, "keep-devices", false, "on SIGTERM/SIGINT leave every device for the next serve to recover")
	c.Flags().BoolVar(&o.noPin, "no-pin", false, "do not pin queue threads to their CPUs (--queue-cpus any)")
	c.Flags().StringVar(&o.cpus, "queue-cpus", queueCPUsDefault, queueCPUsUsage)
	c.Flags().BoolVar(&o.noFixed, "no-fixed-buffers", false, "do not register I/O buffers with io_uring")
	c.Flags().BoolVar(&o.noZC, "no-zero-copy", false, noZeroCopyUsage+" (devices the daemon creates; recovered ones keep theirs)")
	c.Flags().BoolVar(&o.batchIO, "batch-io", false, batchIOUsage+" (devices the daemon creates; recovered ones keep theirs)")
	c.Flags().BoolVar(&o.defer_, "defer-taskrun", true, "create queue rings with IORING_SETUP_DEFER_TASKRUN (completions run when the queue thread waits; --defer-taskrun=false: as they come)")
	c.Flags().DurationVar(&o.poll, "poll", 0, "queue threads poll this long after activity before sleeping (e.g. 50us)")
	c.Flags().DurationVar(&o.memberTimeout, "member-timeout", defaultMemberTimeout, "fail a member whose I/O takes longer than this (0: never)")
	c.Flags().StringVar(&o.sched, "scheduler", schedulerDefault, schedulerUsage)
	return c
}

func (o serveDaemonOptions) validate() (daemon.QueueOptions, error) {
	q := daemon.QueueOptions{NoPin: o.noPin, NoFixedBuffers: o.noFixed, NoZeroCopy: o.noZC, BatchIO: o.batchIO, DeferTaskrun: o.defer_, MemberTimeout: o.memberTimeout}
	if o.memberTimeout < 0 || (o.memberTimeout > 0 && o.memberTimeout < 2*time.Second) {
		return q, usagef("--member-timeout %v: 0 (never) or at least 2s", o.memberTimeout)
	}
	if o.metricsListen != "" {
		// A port out of range would be refused only by net.Listen, once
		// serve has taken the control socket: a numeric port is checked
		// here (named ports are not taken).
		_, port, err := net.SplitHostPort(o.metricsListen)
		if err != nil || port == "" {
			return q, usagef("--metrics-listen %q: want host:port, e.g. %s", o.metricsListen, daemon.DefaultMetricsListen)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return q, usagef("--metrics-listen %q: the port must be a number from 0 to 65535", o.metricsListen)
		}
	}
	if o.poll < 0 {
		return q, usagef("--poll %v: must not be negative", o.poll)
	}
	if err := ublk.CheckScheduler(o.sched); err != nil {
		return q, usagef("--scheduler: %v", err)
	}
	cpus, err := ublk.ParseQueueCPUs(o.cpus)
	if err != nil {
		return q, usagef("--queue-cpus %v", err)
	}
	q.CPUs = cpus
	q.PollFor = o.poll
	q.Scheduler = o.sched
	return q, nil
}

func runServe(cfg daemon.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// No prepareProcess here: its unshare(CLONE_NEWNS) copies the mount
	// table as it is when serve starts, and after a restart that includes
	// filesystems mounted on the arrays serve recovers. Where mounts are
	// private, the copy pins them: after umount the filesystem stays
	// alive in the daemon and its device stays busy (del refuses it).
	return daemon.Run(ctx, cfg)
}

// ---- add

type addOptions struct {
	run runOptions // level, layout, chunk, name, members, force
	// newArrayFlag is the first flag given that describes a new array or
	// its device (add -n N --spare refuses it).
	newArrayFlag string
}

func newAddCmd(socket *string) *cobra.Command {
	var o addOptions
	c := &cobra.Command{
		Use:   "add [--level 0|1|10] [--layout n2|f2|o2|n3|f3|o3] [--chunk SIZE] [--name NAME] [-n N] [--spare DEV]... MEMBER...\n  ublk-raid add -n N --spare DEV...",
		Short: "Create an array (members without superblocks) or assemble one, served by the daemon as /dev/ublkbN; or add spares to array N",
		Long: "With members: creates a new array (--level given, members without superblocks) or assembles the array\n" +
			"their superblocks describe, served by the daemon as /dev/ublkbN. --spare devices are held as spares: a\n" +
			"member that fails is replaced by one at once and rebuilt.\n" +
			"Without members (-n N --spare DEV): adds DEV as a spare of running array N (like mdadm --add); if a role\n" +
			"is faulty or missing, DEV takes it and is rebuilt at once. Every DEV is checked before any is added: a refusal\n" +
			"adds none.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && len(o.run.spares) == 0 {
				return usagef("add needs at least one member")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.run.changed = cmd.Flags().Changed
			if len(args) == 0 {
				// Spares for a running array: what describes a new
				// array or its device would be dropped unsaid.
				// (--level, --layout, --name: addSpares.)
				for _, name := range []string{"chunk", "write-mostly", "no-bitmap", "bitmap-region", "assume-clean",
					"sync-speed-min", "sync-speed-max", "queues", "depth", "max-io"} {
					if f := cmd.Flags().Lookup(name); f != nil && f.Changed && o.newArrayFlag == "" {
						o.newArrayFlag = "--" + f.Name
						if f.Shorthand != "" {
							o.newArrayFlag = "-" + f.Shorthand + "/" + o.newArrayFlag
						}
					}
				}
				return addSpares(o, daemon.NewClient(*socket), cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			req, err := o.request(args)
			if err != nil {
				return err
			}
			a, err := daemon.NewClient(*socket).Add(req)
			if err != nil {
				return err
			}
			warnings := a.Warnings
			if w := queuesWarning(req.Queues, a.Queues); w != "" {
				warnings = append(warnings, w)
			}
			printWarnings(cmd.ErrOrStderr(), warnings)
			fmt.Fprintln(cmd.OutOrStdout(), a.Device)
			return nil
		},
	}
	c.Flags().IntVarP(&o.run.serve.number, "number", "n", -1, "device number N of /dev/ublkbN (-1: first free)")
	c.Flags().IntVarP(&o.run.serve.queues, "queues", "q", 0, queuesUsage)
	c.Flags().IntVarP(&o.run.serve.depth, "depth", "d", ublk.DefaultDepth, "requests in flight per queue")
	c.Flags().StringVar(&o.run.serve.maxIO, "max-io", "512K", "largest request (multiple of 4K, up to 32M)")
	c.Flags().StringVarP(&o.run.level, "level", "l", "", "RAID level for a new array: 0, 1, 10, 5 or 6 (none: assemble)")
	c.Flags().StringVar(&o.run.layout, "layout", "", "raid10 layout: n2 (default), f2, o2, n3, f3, o3; raid5/6: ls (default), rs, la, ra")
	c.Flags().StringVarP(&o.run.chunk, "chunk", "c", "512K", "chunk size for a new array: power of two, 4K..64M")
	c.Flags().StringVar(&o.run.name, "name", "", "array name (up to 32 bytes)")
	o.run.addBitmapFlags(c)
	c.Flags().StringArrayVar(&o.run.writeMostly, "write-mostly", nil,
		"MEMBER (one of the members given) is read only when no other copy can serve (repeatable; raid1, 10, 5 and 6)")
	c.Flags().StringArrayVar(&o.run.spares, "spare", nil, "hold DEVICE as a spare that takes a failed member's role (repeatable; raid1, 10, 5 and 6)")
	c.Flags().BoolVar(&o.run.force, "force", false, forceUsage+forceAssembleUsage)
	return c
}

// forceUsage describes --force (add, run, replace).
const forceUsage = "overwrite devices that carry a filesystem, partition table, RAID/LVM/LUKS signature or another array's superblock"

// forceAssembleUsage is the rest of --force for commands that assemble
// (add, run).
const forceAssembleUsage = "; assemble members that disagree (split brain, or a member recorded as failed): the freshest is authoritative, the others are fully rebuilt from it" +
	" (unless too few members are in sync to start the array: then the freshest stale ones are put in sync as they are, only as many as needed, and the writes they missed are lost)" +
	"; start a raid5/6 not stopped cleanly, with a member out, whose write-hole log cannot replay every interrupted write (md's dirty degraded array)"

// addSpares adds o's spares to running array o.number (add without
// members).
func addSpares(o addOptions, c *daemon.Client, stdout, stderr io.Writer) error {
	if o.run.serve.number < 0 {
		return usagef("add --spare without members needs -n N, the array to add them to")
	}
	if err := checkNumber(o.run.serve.number); err != nil {
		return err
	}
	if o.run.level != "" || o.run.layout != "" || o.run.name != "" {
		return usagef("--level, --layout and --name describe a new array: give its members")
	}
	if o.newArrayFlag != "" {
		return usagef("%s describes a new array or its device: add -n N --spare DEV takes only --force", o.newArrayFlag)
	}
	spares, err := absPaths(o.run.spares)
	if err != nil {
		return err
	}
	for i, sp := range spares {
		if err := textArg(sp); err != nil {
			return err
		}
		for _, q := range spares[:i] {
			if daemon.SameDevice(sp, q) {
				if sp == q {
					return usagef("--spare %s: given twice", sp)
				}
				return usagef("--spare %s: given twice (as %s)", sp, q)
			}
		}
	}
	// One request: the daemon checks every device before it adds any, so
	// a refused one leaves none added.
	req := daemon.MemberRequest{Member: spares[0], Force: o.run.force}
	if len(spares) > 1 {
		req = daemon.MemberRequest{Members: spares, Force: o.run.force}
	}
	a, err := c.MemberOp(o.run.serve.number, "add-spare", req)
	if err != nil {
		return err
	}
	for _, sp := range spares {
		fmt.Fprintf(stdout, "added %s as a spare of %s\n", sp, daemon.DevicePath(o.run.serve.number))
	}
	printWarnings(stderr, a.Warnings)
	return nil
}

// printWarnings prints the warnings of a daemon's answer (add, member
// operations: a state file not written) to stderr.
func printWarnings(stderr io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(stderr, "ublk-raid: warning:", w)
	}
}

// request validates the flags (touching nothing) into the daemon request.
// Paths are made absolute: the daemon does not share this command's
// working directory, and a relative path would name another file there.
func (o *addOptions) request(members []string) (daemon.AddRequest, error) {
	var err error
	for _, ps := range []*[]string{&members, &o.run.spares, &o.run.writeMostly} {
		if *ps, err = absPaths(*ps); err != nil {
			return daemon.AddRequest{}, err
		}
	}
	o.run.members = members
	if _, err := o.run.spec(); err != nil {
		return daemon.AddRequest{}, err
	}
	req, _ := o.run.request() // checked by spec
	cfg, err := o.run.serve.config()
	if err != nil {
		return daemon.AddRequest{}, err
	}
	n := o.run.serve.number
	req.Number, req.Queues, req.Depth, req.MaxIOBytes = &n, cfg.Queues, cfg.Depth, cfg.MaxIOBytes
	return req, nil
}

// absPaths makes paths absolute (and clean) against the working
// directory.
func absPaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" {
			return nil, usagef("a member path is empty")
		}
		a, err := absPath(p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// absPath makes p absolute against the working directory as the kernel
// knows it (getcwd, not $PWD, which names the directory through the
// symlinks the shell followed), and clean without changing the file it
// names (daemon.CleanPath: a ".." after a symlink is resolved, not
// dropped as text, unlike filepath.Abs).
func absPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		wd, err := unix.Getwd()
		if err != nil {
			return "", err
		}
		p = wd + "/" + p
	}
	return daemon.CleanPath(p), nil
}

// textArg refuses a path JSON would carry as other text than was given
// (invalid UTF-8 becomes U+FFFD), or with control characters.
func textArg(p string) error {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) {
		return usagef("%q: not UTF-8 text without control characters", p)
	}
	return nil
}

// ---- del

type delOptions struct {
	number int
	all    bool
}

func newDelCmd(socket *string) *cobra.Command {
	var o delOptions
	c := &cobra.Command{
		Use:   "del (-n N | --all)",
		Short: "Stop and delete array/device N (or all); the daemon marks its arrays clean",
		Long: "Asks the daemon to delete its array N (refused while the device is mounted). A device the daemon\n" +
			"does not serve (ublk-raid run/passthrough, or no daemon running) is stopped and deleted directly;\n" +
			"its server exits. --all does both for every device.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDel(o, daemon.NewClient(*socket), cmd.OutOrStdout())
		},
	}
	c.Flags().IntVarP(&o.number, "number", "n", -1, "device number")
	c.Flags().BoolVar(&o.all, "all", false, "delete every ublk device")
	return c
}

func runDel(o delOptions, c *daemon.Client, stdout io.Writer) error {
	if (o.number < 0) == !o.all {
		return usagef("del needs exactly one of -n N and --all")
	}
	if err := checkNumber(o.number); err != nil {
		return err
	}
	if !o.all {
		res, err := c.Delete(o.number)
		var re *daemon.RemoteError
		switch {
		case err == nil:
			printDeleted(stdout, res)
			return nil
		case errors.Is(err, daemon.ErrNotRunning), errors.As(err, &re) && re.Status == http.StatusNotFound:
			return kernelDel(stdout, []uint32{uint32(o.number)})
		default:
			return err
		}
	}
	res, err := c.DeleteAll()
	printDeleted(stdout, res)
	if err != nil && !errors.Is(err, daemon.ErrNotRunning) {
		return err
	}
	ids, lerr := listDevices()
	if lerr != nil {
		return lerr
	}
	return kernelDel(stdout, ids)
}

// checkNumber refuses a device number beyond any ublk device: bad usage
// whether or not a daemon runs, before it is asked. (Without a daemon,
// del sends N to the kernel as uint32(N): another device for a larger N.)
func checkNumber(n int) error {
	if n >= daemon.MaxDevice {
		return usagef("-n %d: not a device number (0..%d)", n, daemon.MaxDevice-1)
	}
	return nil
}

func printDeleted(w io.Writer, res daemon.DeleteResult) {
	for _, n := range res.Forgotten {
		fmt.Fprintf(w, "forgot %s (its array had not started)\n", daemon.DevicePath(n))
	}
	for _, d := range res.Deleted {
		fmt.Fprintf(w, "deleted %s\n", d)
	}
}

// kernelDel stops and deletes devices directly (their servers exit).
func kernelDel(stdout io.Writer, ids []uint32) error {
	if len(ids) == 0 {
		return nil
	}
	ctrl, err := ublk.OpenControl()
	if err != nil {
		return err
	}
	defer ctrl.Close()
	var errs []error
	for _, id := range ids {
		if err := stopUnused(ctrl, id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := ctrl.DelDev(id); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(stdout, "deleted /dev/ublkb%d\n", id)
	}
	return errors.Join(errs...)
}

// stopUnused stops device id unless its block device is in use: the
// kernel checks for openers itself where it can (UBLK_F_SAFE_STOP_DEV,
// 7.0+); on older drivers an exclusive open that fails with EBUSY (a
// mount, device-mapper, md) refuses.
func stopUnused(ctrl *ublk.Control, id uint32) error {
	path := daemon.DevicePath(int(id))
	busy := fmt.Errorf("%s is in use (mounted, or held by another program): unmount it first", path)
	info, err := ctrl.DevInfo(id)
	if err != nil {
		return err
	}
	// A device without a server (live: served) waits for a recovery: its
	// plain openers are requests waiting for good, not users to protect
	// (a reader blocked on it cannot close it, and the kernel's stop only
	// while unused would refuse for it forever), so only a mount or
	// another exclusive holder refuses, as on drivers without that stop.
	if info.State == ublk.StateLive && info.Flags&ublk.FlagSafeStopDev != 0 {
		if err := ctrl.StopUnusedDev(id); !errors.Is(err, ublk.ErrInUse) {
			return err
		}
		return busy
	}
	if daemon.InUse(int(id)) {
		return busy
	}
	return ctrl.StopDev(id)
}

// listDevices returns the ids of the ublk devices on the machine, from
// their character devices.
func listDevices() ([]uint32, error) {
	ents, err := os.ReadDir("/sys/class/ublk-char")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, e := range ents {
		if n, err := strconv.ParseUint(strings.TrimPrefix(e.Name(), "ublkc"), 10, 32); err == nil {
			ids = append(ids, uint32(n))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// ---- list

type listOptions struct{ output string }

// listJSON is the stable -o json schema of list.
type listJSON struct {
	// Daemon tells whether a daemon answered; Arrays are its arrays.
	Daemon bool           `json:"daemon"`
	Arrays []daemon.Array `json:"arrays"`
	// OtherDevices are ublk devices the daemon does not serve (run,
	// passthrough, or every device when no daemon runs).
	OtherDevices []deviceJSON `json:"other_devices"`
}

type deviceJSON struct {
	Number int    `json:"number"`
	Device string `json:"device"`
	State  string `json:"state"` // live, quiesced, dead
	PID    int    `json:"pid"`
	Queues int    `json:"queues"`
	Depth  int    `json:"depth"`
	// UblkFlags are the UBLK_F_* features the device was created with.
	UblkFlags []string `json:"ublk_flags"`
}

func newListCmd(socket *string) *cobra.Command {
	var o listOptions
	c := &cobra.Command{
		Use:   "list [-o json]",
		Short: "List the daemon's arrays and any other ublk devices",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output); err != nil {
				return err
			}
			return runList(o, daemon.NewClient(*socket), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return c
}

func checkOutput(o string) error {
	if o != "text" && o != "json" {
		return usagef("-o %q: want text or json", o)
	}
	return nil
}

func runList(o listOptions, c *daemon.Client, stdout, stderr io.Writer) error {
	j := listJSON{Arrays: []daemon.Array{}, OtherDevices: []deviceJSON{}}
	arrays, err := c.List()
	switch {
	case err == nil:
		j.Daemon, j.Arrays = true, arrays
	case errors.Is(err, daemon.ErrNotRunning):
		if o.output == "text" {
			fmt.Fprintln(stderr, "ublk-raid: no daemon running (start it with `systemctl start ublk-raid` or `ublk-raid serve`); showing other ublk devices only")
		}
	default:
		return err
	}
	ids, err := listDevices()
	if err != nil {
		return err
	}
	var others []uint32
	for _, id := range ids {
		if !slices.ContainsFunc(j.Arrays, func(a daemon.Array) bool { return a.Number == int(id) }) {
			others = append(others, id)
		}
	}
	if len(others) > 0 {
		ctrl, err := ublk.OpenControl()
		if err != nil {
			return err
		}
		defer ctrl.Close()
		for _, id := range others {
			info, err := ctrl.DevInfo(id)
			if err != nil {
				continue // deleted meanwhile
			}
			j.OtherDevices = append(j.OtherDevices, deviceJSON{Number: int(id), Device: daemon.DevicePath(int(id)),
				State: stateName(info.State), PID: int(info.UblksrvPid), Queues: int(info.NrHwQueues), Depth: int(info.QueueDepth),
				UblkFlags: ublk.FlagNames(info.Flags)})
		}
	}
	if o.output == "json" {
		return writeJSON(stdout, j)
	}
	return writeListText(stdout, j)
}

// writeListText is list's text output: a line per array, its members
// (state in parentheses unless active) and spares marked (S) as in
// /proc/mdstat; then the ublk devices the daemon does not serve.
func writeListText(stdout io.Writer, j listJSON) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(j.Arrays) > 0 {
		fmt.Fprintln(tw, "DEVICE\tLEVEL\tSIZE\tSTATE\tDISKS\tNAME\tMEMBERS")
		for _, a := range j.Arrays {
			var ms []string
			for _, m := range a.Members {
				if m.Path != "" && m.State != "missing" {
					p := m.Path
					if m.State != "active" {
						p += "(" + m.State + ")"
					}
					ms = append(ms, p)
				}
			}
			for _, p := range a.Spares {
				ms = append(ms, p+"(S)")
			}
			size, disks := humanSize(a.SizeBytes), fmt.Sprintf("%d/%d", a.ActiveDisks, a.RaidDisks)
			if a.State == "inactive" { // (not known until it starts)
				size, disks = "-", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Device, dash(levelText(a)), size, a.State,
				disks, dash(a.Name), strings.Join(ms, " "))
		}
	}
	if len(j.OtherDevices) > 0 {
		if len(j.Arrays) > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "DEVICE\tSTATE\tPID\tQUEUES\tDEPTH\t(not served by the daemon)")
		for _, d := range j.OtherDevices {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t\n", d.Device, d.State, d.PID, d.Queues, d.Depth)
		}
	}
	return tw.Flush()
}

func stateName(s uint16) string {
	switch s {
	case ublk.StateDead:
		return "dead"
	case ublk.StateLive:
		return "live"
	case ublk.StateQuiesced:
		return "quiesced"
	}
	return "unknown"
}

func levelText(a daemon.Array) string {
	if a.Layout != "" {
		return a.Level + "/" + a.Layout
	}
	return a.Level
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanSize prints bytes in binary units with 2 decimals (1.00G).
func humanSize(b uint64) string {
	units := []string{"", "K", "M", "G", "T", "P"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", b)
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---- detail

type detailOptions struct {
	number int
	output string
	test   bool
	wait   bool
}

func newDetailCmd(socket *string) *cobra.Command {
	var o detailOptions
	c := &cobra.Command{
		Use:   "detail -n N [-o json] [--test]",
		Short: "Describe array N: level, size, state and members (like mdadm --detail)",
		Long: "With --test the exit code tells the array's health, as mdadm's: 0 active, 1 degraded, 2 failed,\n" +
			"4 when the array cannot be described (no daemon, no such array).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.number < 0 {
				return usagef("detail needs -n N")
			}
			if err := checkNumber(o.number); err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			return runDetail(o, daemon.NewClient(*socket), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().IntVarP(&o.number, "number", "n", -1, "array (device) number")
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	c.Flags().BoolVar(&o.test, "test", false, "exit 1 if the array is degraded, 2 if it failed (4: cannot tell)")
	c.Flags().BoolVar(&o.wait, "wait", false, "follow the background jobs (rebuild, resync, check, and one that follows at once, such as the resync a rebuild left pending) until they end, then describe the array")
	return c
}

func runDetail(o detailOptions, c *daemon.Client, stdout, stderr io.Writer) error {
	a, err := c.Detail(o.number)
	for o.wait && err == nil && (a.Sync.Action != "idle" || a.Sync.Settling) {
		if o.output != "json" {
			fmt.Fprintln(stdout, syncLine(a.Sync))
		}
		time.Sleep(time.Second)
		a, err = c.Detail(o.number)
	}
	if err != nil {
		if o.test {
			fmt.Fprintln(stderr, "ublk-raid:", err)
			return exitStatus(testError)
		}
		return err
	}
	if o.output == "json" {
		err = writeJSON(stdout, a)
	} else {
		err = printDetail(stdout, a)
	}
	if err != nil || !o.test {
		return err
	}
	switch {
	case a.State == "failed" || a.State == "broken" || a.State == "inactive": // (unusable, as mdadm's 2)
		return exitStatus(testFailed)
	case a.Degraded:
		return exitStatus(testDegraded)
	}
	return nil
}

func printDetail(w io.Writer, a daemon.Array) error {
	fmt.Fprintf(w, "%s:\n", a.Device)
	if a.State == "inactive" {
		// An array of the state file that did not start: what the
		// entry says, as mdadm --detail describes an inactive array.
		tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.AlignRight)
		for _, r := range [][2]string{{"Name", dash(a.Name)}, {"UUID", a.UUID},
			{"State", "inactive (it did not start: see the daemon's log)"}} {
			fmt.Fprintf(tw, "%s\t : %s\n", r[0], r[1])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		for _, m := range a.Members {
			fmt.Fprintf(w, "    -   %s\n", m.Path)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.AlignRight)
	yes := map[bool]string{true: "yes", false: "no"}
	rows := [][2]string{
		{"Name", dash(a.Name)}, {"UUID", a.UUID}, {"Raid Level", a.Level}, {"Layout", a.Layout},
		{"Array Size", fmt.Sprintf("%d KiB (%s)", a.SizeBytes>>10, humanSize(a.SizeBytes))},
	}
	if a.Level != "raid1" {
		rows = append(rows, [2]string{"Chunk Size", humanSize(a.ChunkBytes)})
	}
	rows = append(rows, [][2]string{
		{"Raid Devices", fmt.Sprint(a.RaidDisks)}, {"Active Devices", fmt.Sprint(a.ActiveDisks)},
		{"Failed Devices", fmt.Sprint(a.FailedDisks)}, {"Missing Devices", fmt.Sprint(a.MissingDisks)},
		{"Spare Devices", fmt.Sprint(a.SpareDisks)},
		{"State", a.State}, {"Events", fmt.Sprint(a.Events)},
		{"Queues", fmt.Sprintf("%d x depth %d", a.Queues, a.Depth)},
		{"Ublk Features", strings.Join(a.UblkFlags, ", ")},
		{"Recovered", yes[a.Recovered]},
		{"Serving Since", a.Since.Format("2006-01-02 15:04:05 MST")},
	}...)
	for _, r := range rows {
		if r[1] != "" {
			fmt.Fprintf(tw, "%s\t : %s\n", r[0], r[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "    Role\tState\tDevice")
	for _, m := range a.Members {
		st := m.State
		if m.State == "rebuilding" {
			st = fmt.Sprintf("rebuilding (%s done)", humanSize(m.RebuildOffsetBytes))
		}
		fmt.Fprintf(tw, "    %d\t%s\t%s\n", m.Role, st, dash(m.Path))
	}
	for _, sp := range a.Spares {
		fmt.Fprintf(tw, "    -\tspare\t%s\n", sp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if b := a.Bitmap; b != nil {
		fmt.Fprintf(w, "Bitmap : %d regions of %s, %d dirty", b.Regions, humanSize(b.RegionBytes), b.DirtyRegions)
		if b.AllDirty {
			fmt.Fprintf(w, " (the bitmap was unusable at assembly: every region resynced)")
		} else if b.DirtyAtAssembly > 0 {
			fmt.Fprintf(w, " (%d dirty at assembly)", b.DirtyAtAssembly)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, syncLine(a.Sync))
	return nil
}

// syncLine is /proc/mdstat's progress line for the background job.
func syncLine(y array.SyncStatus) string {
	if y.Action == "idle" {
		s := "Sync : idle"
		if y.LastAction != "" && y.LastAction != y.LastCheck {
			s += fmt.Sprintf(", last %s: %s", y.LastAction, y.LastResult)
		}
		if y.LastCheck != "" {
			// (Kept when a job follows it, as md keeps mismatch_cnt.)
			s += fmt.Sprintf(", last %s: %s, mismatch_cnt %d (sectors)", y.LastCheck, y.LastCheckResult, y.MismatchCnt)
		}
		if y.ResyncNeeded {
			s += " (regions await resync)"
		}
		return s
	}
	frac := 0.0
	if y.Total > 0 {
		// At most 1: the daemon reads Done and Total apart, and between
		// two jobs may pair the last one's position with the next one's
		// (smaller) end.
		frac = min(float64(y.Done)/float64(y.Total), 1)
	}
	const width = 20
	n := int(frac * width)
	bar := strings.Repeat("=", n) + ">" + strings.Repeat(".", width-n)
	s := fmt.Sprintf("%s : [%s] %.1f%% (%s/%s)", y.Action, bar[:width+1], 100*frac, humanSize(y.Done), humanSize(y.Total))
	if y.SpeedBytes > 0 {
		s += fmt.Sprintf(" speed=%s/s finish=%.1fmin", humanSize(uint64(y.SpeedBytes)), y.ETASeconds/60)
	}
	if len(y.Targets) > 0 {
		s += fmt.Sprintf(" roles %v", y.Targets)
	}
	return s
}

// ---- fail, remove, re-add, replace, check, repair

type memberOptions struct {
	number int
	with   string
	force  bool
}

// newMemberCmd makes a command that posts op on one member of array N.
func newMemberCmd(socket *string, op, short, done string) *cobra.Command {
	var o memberOptions
	use := op + " -n N MEMBER"
	if op == "replace" {
		use += " [--with NEW]"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  short + ".\nMEMBER is a member's path or its role number.",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.number < 0 {
				return usagef("%s needs -n N, the array", op)
			}
			if err := checkNumber(o.number); err != nil {
				return err
			}
			if args[0] == "" {
				return usagef("MEMBER is empty")
			}
			if f := cmd.Flags().Lookup("with"); f != nil && f.Changed && o.with == "" {
				// (Left out, a spare is taken: an empty one, say an
				// unset variable, must not stand for that.)
				return usagef("--with is empty")
			}
			for _, p := range []string{args[0], o.with} {
				if err := textArg(p); err != nil {
					return err
				}
			}
			// Paths are made absolute, as add's: the daemon does not run
			// in this directory. A role number is sent as it is.
			member, with := args[0], o.with
			_, err := strconv.Atoi(member)
			isPath := err != nil
			if isPath {
				if member, err = absPath(member); err != nil {
					return err
				}
			}
			if with != "" {
				if with, err = absPath(with); err != nil {
					return err
				}
				// The same device twice, as add refuses it: a member
				// cannot take its own role.
				if isPath && daemon.SameDevice(member, with) {
					if member == with {
						return usagef("--with %s: given twice (it is MEMBER)", with)
					}
					return usagef("--with %s: given twice (as MEMBER %s)", with, member)
				}
			}
			a, err := daemon.NewClient(*socket).MemberOp(o.number, op, daemon.MemberRequest{Member: member, With: with, Force: o.force})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), done+" (%s)\n", args[0], a.Device, a.State)
			printWarnings(cmd.ErrOrStderr(), a.Warnings)
			return nil
		},
	}
	c.Flags().IntVarP(&o.number, "number", "n", -1, "array (device) number")
	if op == "replace" {
		c.Flags().StringVar(&o.with, "with", "", "the new member (default: a spare)")
		c.Flags().BoolVar(&o.force, "force", false, forceUsage)
	}
	return c
}

func newArrayOpCmd(socket *string, op, short string) *cobra.Command {
	var o memberOptions
	c := &cobra.Command{
		Use:   op + " -n N",
		Short: short,
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.number < 0 {
				return usagef("%s needs -n N, the array", op)
			}
			if err := checkNumber(o.number); err != nil {
				return err
			}
			a, err := daemon.NewClient(*socket).ArrayOp(o.number, op)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s started on %s\n", op, a.Device)
			return nil
		},
	}
	c.Flags().IntVarP(&o.number, "number", "n", -1, "array (device) number")
	return c
}

func newManageCmds(socket *string) []*cobra.Command {
	return []*cobra.Command{
		newAddCmd(socket), newDelCmd(socket), newListCmd(socket), newDetailCmd(socket),
		newMemberCmd(socket, "fail", "Mark a member faulty (like mdadm --fail); reads and writes go to the other copies", "set %s faulty in %s"),
		newMemberCmd(socket, "remove", "Take a faulty member out of its array (like mdadm --remove)", "removed %s from %s"),
		newMemberCmd(socket, "re-add", "Put a removed member back and resync what it missed (like mdadm --re-add)", "re-added %s to %s"),
		newMemberCmd(socket, "replace", "Put a new member or a spare into a member's role and rebuild it; the old one is failed first, once the new one passed every check (unlike mdadm --replace, which copies before it fails the old one)", "replacing %s in %s"),
		newArrayOpCmd(socket, "check", "Read every copy and count mismatches (like md's check)"),
		newArrayOpCmd(socket, "repair", "Read every copy and rewrite mismatches (like md's repair)"),
		newGrowCmd(socket),
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// serveOptions are the queue settings shared by commands that serve a device.
type serveOptions struct {
	number  int
	queues  int
	depth   int
	maxIO   string
	noPin   bool
	cpus    string
	noFixed bool
	noZC    bool
	batchIO bool
	defer_  bool
	poll    time.Duration
	sched   string
}

const noZeroCopyUsage = "keep the copy path where the kernel offers zero copy (UBLK_F_AUTO_BUF_REG, 6.16+): member timeouts then also end reads"

const batchIOUsage = "serve the device with batched ublk commands (UBLK_F_BATCH_IO, Linux 7.0+; an error where the kernel lacks it): one command prepares, fetches or commits many requests"

// The ublk device only remaps requests onto members that have schedulers
// of their own; the kernel would give a one-queue device mq-deadline.
const (
	schedulerDefault = "none"
	schedulerUsage   = "I/O scheduler of the ublk block device (\"\": the kernel's choice, mq-deadline for one queue)"
)

// Where queue threads run by default (ublk.QueueCPUs).
const (
	queueCPUsDefault = string(ublk.DefaultCPUs)
	queueCPUsUsage   = "where queue threads run: others (any CPU but their queue's: never competing with the submitter), own (pinned to their queue's first CPU), any (unpinned)"
)

// queuesUsage is the help of -q: the kernel makes at most one queue per
// CPU, and says nothing when it cuts a larger number (the commands warn).
var queuesUsage = fmt.Sprintf("queues (0: one per CPU, at most %d; more than one per CPU is cut to one per CPU, with a warning)", ublk.MaxDefaultQueues)

// queuesWarning is the warning for a device made with got queues when
// asked asked ("" when it got what it asked or asked none).
func queuesWarning(asked, got int) string {
	if asked <= 0 || got <= 0 || got == asked {
		return ""
	}
	return fmt.Sprintf("--queues %d: the device has %d (the kernel makes at most one per CPU)", asked, got)
}

func (o *serveOptions) addFlags(c *cobra.Command) {
	c.Flags().IntVarP(&o.number, "number", "n", -1, "device number N of /dev/ublkbN (-1: first free)")
	c.Flags().IntVarP(&o.queues, "queues", "q", 0, queuesUsage)
	c.Flags().IntVarP(&o.depth, "depth", "d", ublk.DefaultDepth, "requests in flight per queue")
	c.Flags().StringVar(&o.maxIO, "max-io", "512K", "largest request (multiple of 4K, up to 32M)")
	c.Flags().BoolVar(&o.noPin, "no-pin", false, "do not pin queue threads to their CPUs (--queue-cpus any)")
	c.Flags().StringVar(&o.cpus, "queue-cpus", queueCPUsDefault, queueCPUsUsage)
	c.Flags().BoolVar(&o.noFixed, "no-fixed-buffers", false, "do not register I/O buffers with io_uring")
	c.Flags().BoolVar(&o.noZC, "no-zero-copy", false, noZeroCopyUsage)
	c.Flags().BoolVar(&o.batchIO, "batch-io", false, batchIOUsage)
	c.Flags().BoolVar(&o.defer_, "defer-taskrun", true, "create queue rings with IORING_SETUP_DEFER_TASKRUN (completions run when the queue thread waits; --defer-taskrun=false: as they come)")
	c.Flags().DurationVar(&o.poll, "poll", 0, "queue threads poll this long after activity before sleeping (e.g. 50us; 0: off)")
	c.Flags().StringVar(&o.sched, "scheduler", schedulerDefault, schedulerUsage)
}

func (o *serveOptions) config() (ublk.Config, error) {
	maxIO, err := parseSize(o.maxIO)
	if err != nil {
		return ublk.Config{}, usagef("--max-io: %v", err)
	}
	switch {
	case o.number < -1 || o.number >= daemon.MaxDevice:
		// (Not wrapped to another device by uint32(N): recover acts on it.)
		return ublk.Config{}, usagef("--number %d: must be -1 or a device number (0..%d)", o.number, daemon.MaxDevice-1)
	case o.queues < 0 || o.queues > 4096:
		return ublk.Config{}, usagef("--queues %d: must be 0..4096", o.queues)
	case o.depth < 1 || o.depth > 4096:
		return ublk.Config{}, usagef("--depth %d: must be 1..4096", o.depth)
	case maxIO < 4096 || maxIO%4096 != 0 || maxIO > 32<<20:
		return ublk.Config{}, usagef("--max-io %s: must be a multiple of 4K from 4K to 32M", o.maxIO)
	case o.poll < 0:
		return ublk.Config{}, usagef("--poll %v: must not be negative", o.poll)
	}
	if err := ublk.CheckScheduler(o.sched); err != nil {
		return ublk.Config{}, usagef("--scheduler: %v", err)
	}
	var cpus ublk.QueueCPUs // "" (add: the daemon's setting)
	if o.cpus != "" {
		if cpus, err = ublk.ParseQueueCPUs(o.cpus); err != nil {
			return ublk.Config{}, usagef("--queue-cpus %v", err)
		}
	}
	return ublk.Config{ID: o.number, Queues: o.queues, Depth: o.depth, MaxIOBytes: int(maxIO), CPUs: cpus,
		NoPin: o.noPin, NoFixedBuffers: o.noFixed, NoZeroCopy: o.noZC, BatchIO: o.batchIO, DeferTaskrun: o.defer_, PollFor: o.poll, Scheduler: o.sched}, nil
}

// parseSize parses 4096, 4K, 512k, 1M, 2G, 4T (mdadm's suffixes); a size
// that does not fit in 63 bits is refused, not wrapped.
func parseSize(orig string) (int64, error) {
	s := strings.TrimSpace(orig)
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 't', 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) || (err == nil && v > math.MaxInt64/mult) {
		return 0, fmt.Errorf("%q is too large", orig)
	}
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size", orig)
	}
	return v * mult, nil
}

func newLogger(level string, stderr io.Writer) (*zap.Logger, error) {
	lvl, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	cfg := zap.NewProductionConfig()
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		cfg = zap.NewDevelopmentConfig()
	}
	cfg.Level = lvl
	cfg.OutputPaths = []string{"stderr"}
	cfg.DisableStacktrace = true
	return cfg.Build()
}

// parseLogLevel parses --log-level; a malformed level is bad usage.
func parseLogLevel(level string) (zap.AtomicLevel, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return lvl, usagef("--log-level: %w", err)
	}
	return lvl, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

type passthroughOptions struct {
	serve  serveOptions
	member string
}

func newPassthroughCmd(logLevel *string) *cobra.Command {
	var o passthroughOptions
	c := &cobra.Command{
		Use:   "passthrough MEMBER",
		Short: "Serve /dev/ublkbN as a 1:1 passthrough of one block device or file (foreground)",
		Long: "Creates a ublk device that maps 1:1 onto MEMBER, prints its path once it is live, and serves it\n" +
			"until it is deleted (ublk-raid del) or this process gets SIGINT/SIGTERM (then it deletes it).\n" +
			"If the process dies, `ublk-raid recover -n N MEMBER` re-attaches without I/O errors.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.member = args[0]; o.member == "" {
				return usagef("MEMBER is empty")
			}
			log, err := newLogger(*logLevel, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer log.Sync()
			return runPassthrough(o, false, cmd.OutOrStdout(), log)
		},
	}
	o.serve.addFlags(c)
	return c
}

func newRecoverCmd(logLevel *string) *cobra.Command {
	var o passthroughOptions
	c := &cobra.Command{
		Use:   "recover -n N MEMBER",
		Short: "Re-attach to passthrough device N whose server died, serving it again (foreground; the device keeps its own queues, depth and largest request)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.member = args[0]; o.member == "" {
				return usagef("MEMBER is empty")
			}
			if o.serve.number < 0 {
				return usagef("recover needs -n N, the device to re-attach")
			}
			log, err := newLogger(*logLevel, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer log.Sync()
			return runPassthrough(o, true, cmd.OutOrStdout(), log)
		},
	}
	o.serve.addFlags(c)
	return c
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

// runPassthrough creates (or recovers) a passthrough device and serves it
// until it is stopped.
func runPassthrough(o passthroughOptions, recover bool, stdout io.Writer, log *zap.Logger) error {
	cfg, err := o.serve.config()
	if err != nil {
		return err
	}
	// Checked before the member is opened, so that a missing driver or a
	// non-root user is told so and nothing is touched.
	ctrl, err := ublk.OpenControl()
	if err != nil {
		return err
	}
	defer ctrl.Close()
	prepareProcess(log)
	m, err := busyRetry(recover, func() (*ublk.Member, error) { return ublk.OpenMember(o.member) })
	if err != nil {
		return err
	}
	defer m.Close()
	t := ublk.NewPassthrough(m)
	cfg.Params = t.Params()
	var d *ublk.Device
	if recover {
		d, err = ublk.Recover(ctrl, uint32(o.serve.number), t, cfg)
	} else {
		d, err = ublk.Create(ctrl, t, cfg)
	}
	if err != nil {
		return err
	}
	if w := queuesWarning(o.serve.queues, int(d.Info().NrHwQueues)); w != "" {
		log.Warn(w)
	}
	log.Info("device live", zap.String("device", d.BlockPath()), zap.String("member", o.member),
		zap.Int("queues", int(d.Info().NrHwQueues)), zap.Int("depth", int(d.Info().QueueDepth)),
		zap.Bool("recovered", recover))
	fmt.Fprintln(stdout, d.BlockPath())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		log.Info("signal: deleting device", zap.String("signal", s.String()), zap.String("device", d.BlockPath()))
		return d.Delete()
	case <-d.Done():
		if d.Failed() {
			// As after a crash of this process: the device waits, with
			// its users' requests, for a recovery.
			log.Error("the device's queues failed: it waits for `ublk-raid recover`", zap.String("device", d.BlockPath()), zap.Error(d.Err()))
			return fmt.Errorf("%s: the queues failed (%w): `ublk-raid recover -n %d %s` serves it again", d.BlockPath(), d.Err(), d.ID(), o.member)
		}
		// Stopped from outside (ublk-raid del): release our files so the
		// deleting command's DEL_DEV can finish.
		err := d.Stop()
		log.Info("device stopped", zap.String("device", d.BlockPath()))
		if err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
		return nil
	}
}

// prepareProcess applies the process-wide settings a ublk server wants.
func prepareProcess(log *zap.Logger) {
	// A private mount namespace for the thread that runs the server loop
	// keeps it from holding references on mounts made later on the devices
	// it serves. Best effort: it needs CAP_SYS_ADMIN, which we have.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		log.Debug("unshare(CLONE_NEWNS) failed", zap.Error(err))
	}
	runtime.UnlockOSThread()
}

var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "ublk-raid", version)
			return nil
		},
	}
}

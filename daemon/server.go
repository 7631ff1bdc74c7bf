package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// DefaultMetricsListen is the Prometheus endpoint's default address.
const DefaultMetricsListen = "127.0.0.1:9999"

// Config configures Run.
type Config struct {
	Socket        string // control socket path
	MetricsListen string // host:port of /metrics; "" disables it
	StateFile     string // "" keeps no state file
	// KeepDevices leaves every device for the next daemon to recover
	// when Run's context ends, instead of deleting those not in use.
	KeepDevices bool
	Queue       QueueOptions
	Version     string
	Log         *zap.Logger
	// Ready, if set, is called once the daemon serves (after READY=1).
	Ready func()
}

// Pending arrays (members not there yet) are retried every
// pendingRetryEvery for pendingRetryFor after the start: members appear as
// udev coldplugs them. Later, a restart of serve retries them.
const (
	pendingRetryEvery = 2 * time.Second
	pendingRetryFor   = time.Minute
)

func retryPending(ctx context.Context, mgr *Manager, pending int) {
	if pending == 0 {
		return
	}
	t := time.NewTicker(pendingRetryEvery)
	defer t.Stop()
	end := time.After(pendingRetryFor)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-t.C:
			if mgr.RetryPending() == 0 {
				return
			}
		}
	}
}

// Run is `ublk-raid serve`: it opens the ublk control device and the
// control socket, starts the arrays of the state file, serves the control
// API and the metrics until ctx ends, then shuts down (Manager.Shutdown).
// Errors before serving (no driver, another daemon, a busy metrics port,
// a corrupt state file) are returned before any device is touched, except
// a state file error, which comes after the socket is taken.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	ctrl, err := ublk.OpenControl()
	if err != nil {
		return err
	}
	defer ctrl.Close()
	l, err := Listen(cfg.Socket)
	if err != nil {
		return err
	}
	defer l.Close()
	var ml net.Listener
	if cfg.MetricsListen != "" {
		if ml, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			return fmt.Errorf("metrics endpoint: %w", err)
		}
		defer ml.Close()
	}
	status := func(n int) {
		if err := Notify(fmt.Sprintf("STATUS=serving %d array(s)", n)); err != nil {
			log.Warn("sd_notify", zap.Error(err))
		}
	}
	mgr := NewManager(ctrl, ManagerOptions{StateFile: cfg.StateFile, Log: log, Queue: cfg.Queue})
	started, failed, err := mgr.Restore()
	if err != nil {
		return err
	}
	mgr.opts.OnChange = status // after Restore: no concurrent use yet

	ctl := &http.Server{Handler: NewHandler(mgr, cfg.Version), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: zap.NewStdLog(log.Named("control"))}
	errc := make(chan error, 2)
	go func() { errc <- ctl.Serve(l) }()
	var msrv *http.Server
	if ml != nil {
		mux := http.NewServeMux()
		stdlog := zap.NewStdLog(log.Named("metrics"))
		mux.Handle("/metrics", metrics.Handler(metrics.NewRegistry(mgr), stdlog))
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: stdlog}
		go func() { errc <- msrv.Serve(ml) }()
	}
	log.Info("serving", zap.String("socket", cfg.Socket), zap.String("metrics", cfg.MetricsListen),
		zap.String("state_file", cfg.StateFile), zap.Int("arrays_started", started), zap.Int("arrays_failed", failed),
		zap.String("version", cfg.Version))
	if err := Notify(fmt.Sprintf("READY=1\nSTATUS=serving %d array(s)", started)); err != nil {
		log.Warn("sd_notify", zap.Error(err))
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	go retryPending(ctx, mgr, failed)
	var serr error
	select {
	case <-ctx.Done():
		log.Info("stopping", zap.Bool("keep_devices", cfg.KeepDevices))
	case serr = <-errc:
		log.Error("server failed; stopping", zap.Error(serr))
	}
	Notify("STOPPING=1")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctl.Shutdown(sctx)
	if msrv != nil {
		msrv.Shutdown(sctx)
	}
	mgr.Shutdown(cfg.KeepDevices)
	if errors.Is(serr, http.ErrServerClosed) {
		serr = nil
	}
	return serr
}

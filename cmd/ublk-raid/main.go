// Command ublk-raid is Linux software RAID served from user space on the
// kernel's ublk driver.
package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ublk-raid/ublk-raid/daemon"
)

// usageError marks bad command-line input (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// Exit codes, mdadm-like.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func newRootCmd() *cobra.Command {
	var logLevel, socket string
	root := &cobra.Command{
		Use:           "ublk-raid",
		Short:         "Software RAID in user space on Linux ublk",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that an unknown command is this usage error (one
		// line, exit 2) rather than cobra's (several lines, exit 1).
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		// --log-level is every command's flag, but only the servers
		// log: checked here, a malformed level is bad usage for the
		// daemon's clients too, not ignored.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if _, err := parseLogLevel(logLevel); err != nil {
				return err
			}
			if socket == "" {
				// serve would listen on an unnamed socket; a client
				// would fail to dial "": bad usage either way.
				return usagef("--socket \"\": give the control socket's path (default %s)", daemon.DefaultSocket)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			hint := "see ublk-raid --help"
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = "did you mean " + strings.Join(s, " or ") + "?"
			}
			return usagef("unknown command %q: %s", args[0], hint)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&socket, "socket", daemon.DefaultSocket, "the daemon's control socket")
	root.AddCommand(newServeCmd(&logLevel, &socket), newRunCmd(&logLevel), newExamineCmd(), newExamineBitmapCmd(),
		newPassthroughCmd(&logLevel), newRecoverCmd(&logLevel), newVersionCmd())
	root.AddCommand(newManageCmds(&socket)...)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// No cobra `completion` command: its argument checks escape the
	// usage rules above (an unknown shell printed help and exited 0).
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	// The daemon answers 400 to a request that is wrong in itself, before
	// it acts: bad usage too.
	var re *daemon.RemoteError
	if errors.As(err, &re) && re.Status == http.StatusBadRequest {
		return exitUsage
	}
	return exitError
}

func main() {
	err := newRootCmd().Execute()
	if err != nil && err.Error() != "" {
		fmt.Fprintln(os.Stderr, "ublk-raid:", err)
	}
	os.Exit(exitCode(err))
}

package main

import (
	"encoding/json"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review (sync): md's sync_speed_max may be set below its default
// sync_speed_min (1000 KiB/s) without touching the minimum: throttling a
// rebuild to 512K/s is an ordinary setting. The daemon API accepts it
// (sync_speed_min_bytes omitted: the default, which resync.New clamps to
// the max), but the CLI sends its flag default "1M" as an explicit
// minimum and refuses the command as bad usage, naming --sync-speed-min,
// which the operator never gave.
func TestSyncSpeedMaxBelowDefaultMin(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	// The API takes it.
	if _, err := (daemon.AddRequest{Members: []string{"/dev/x", "/dev/y"}, Level: "1", SyncMaxBytes: 512 << 10}).Spec(); err != nil {
		t.Fatalf("API: sync_speed_max_bytes 512K alone refused: %v", err)
	}
	_, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "--sync-speed-max", "512K", "/dev/a", "/dev/b")
	if code != 0 {
		t.Fatalf("add --sync-speed-max 512K (no --sync-speed-min given): exit %d: %s", code, stderr)
	}
	out, stderr, code := runCLI("detail", "--socket", sock, "-n", "0", "-o", "json")
	var a daemon.Array
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil {
		t.Fatalf("detail: exit %d %s", code, stderr)
	}
}

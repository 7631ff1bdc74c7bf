package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Bad input to the daemon's commands: exit 2, one line, and the daemon is
// never asked (so nothing can touch a device).
func TestManageUsageErrors(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra"}, "expected 0 argument"},
		{[]string{"serve", "--metrics-listen", "9999"}, "--metrics-listen"},
		{[]string{"serve", "--poll", "-1s"}, "--poll"},
		{[]string{"serve", "--poll", "soon"}, "invalid argument"},
		{[]string{"serve", "--log-level", "loud"}, "--log-level"},
		{[]string{"add"}, "at least one member"},
		{[]string{"add", "--level", "4", "/dev/a", "/dev/b"}, "--level \"4\""},
		{[]string{"add", "--level", "1", "--layout", "f2", "/dev/a", "/dev/b"}, "raid10 only"},
		{[]string{"add", "--level", "10", "--layout", "x9", "/dev/a", "/dev/b"}, "layout"},
		{[]string{"add", "--level", "0", "--chunk", "3K", "/dev/a", "/dev/b"}, "--chunk"},
		{[]string{"add", "--level", "0", "--chunk", "big", "/dev/a", "/dev/b"}, "--chunk"},
		{[]string{"add", "--level", "1", "--name", strings.Repeat("x", 33), "/dev/a", "/dev/b"}, "--name"},
		{[]string{"add", "--level", "1", "-n", "-2", "/dev/a", "/dev/b"}, "--number -2"},
		{[]string{"add", "--level", "1", "-q", "-1", "/dev/a", "/dev/b"}, "--queues -1"},
		{[]string{"add", "--level", "1", "-d", "0", "/dev/a", "/dev/b"}, "--depth 0"},
		{[]string{"add", "--level", "1", "--max-io", "3000", "/dev/a", "/dev/b"}, "--max-io"},
		{[]string{"add", "--level", "1", "-n", "x", "/dev/a"}, "invalid argument"},
		{[]string{"add", "--bogus", "/dev/a"}, "unknown flag"},
		{[]string{"del"}, "exactly one of"},
		{[]string{"del", "-n", "1", "--all"}, "exactly one of"},
		{[]string{"del", "-n", "x"}, "invalid argument"},
		{[]string{"del", "-n", "1", "extra"}, "expected 0 argument"},
		{[]string{"list", "extra"}, "expected 0 argument"},
		{[]string{"list", "-o", "yaml"}, "-o \"yaml\""},
		{[]string{"detail"}, "needs -n N"},
		{[]string{"detail", "-n", "0", "-o", "xml"}, "-o \"xml\""},
		{[]string{"detail", "-n", "0", "extra"}, "expected 0 argument"},
		{[]string{"fail", "/dev/a"}, "fail needs -n N"},
		{[]string{"fail", "-n", "0"}, "expected 1 argument"},
		{[]string{"fail", "-n", "0", "a", "b"}, "expected 1 argument"},
		{[]string{"fail", "-n", "0", ""}, "MEMBER is empty"},
		{[]string{"remove", "/dev/a"}, "remove needs -n N"},
		{[]string{"remove", "-n", "0"}, "expected 1 argument"},
		{[]string{"re-add", "/dev/a"}, "re-add needs -n N"},
		{[]string{"re-add", "-n", "0"}, "expected 1 argument"},
		{[]string{"replace", "/dev/a"}, "replace needs -n N"},
		{[]string{"replace", "-n", "0", "--with"}, "flag needs an argument"},
		{[]string{"check"}, "check needs -n N"},
		{[]string{"check", "-n", "0", "/dev/a"}, "expected 0 argument"},
		{[]string{"repair"}, "repair needs -n N"},
		{[]string{"repair", "-n", "0", "/dev/a"}, "expected 0 argument"},
		{[]string{"add", "--level", "1", "--write-mostly", "/dev/c", "/dev/a", "/dev/b"}, "--write-mostly /dev/c"},
		{[]string{"add", "--level", "0", "--write-mostly", "/dev/a", "/dev/a", "/dev/b"}, "raid0"},
		{[]string{"add", "--level", "1", "--no-bitmap", "--bitmap-region", "1M", "/dev/a", "/dev/b"}, "contradict"},
		{[]string{"add", "--level", "1", "--bitmap-region", "3M", "/dev/a", "/dev/b"}, "power of two"},
		{[]string{"add", "--level", "1", "--bitmap-region", "32K", "/dev/a", "/dev/b"}, "at least 64K"},
		{[]string{"add", "--level", "1", "--sync-speed-min", "10M", "--sync-speed-max", "1M", "/dev/a", "/dev/b"}, "above"},
		{[]string{"serve", "--member-timeout", "1s"}, "--member-timeout"},
		{[]string{"serve", "--scheduler", "../x"}, "--scheduler"},
		{[]string{"run", "-l", "1", "--scheduler", "mq deadline", "/dev/a", "/dev/b"}, "--scheduler"},
		{[]string{"add", "--level", "1", "--spare", "/dev/a", "/dev/a", "/dev/b"}, "--spare /dev/a: given twice"},
		{[]string{"add", "--level", "1", "--spare", "/dev/c", "--spare", "/dev/c", "/dev/a", "/dev/b"}, "given twice"},
		{[]string{"add", "--level", "0", "--spare", "/dev/c", "/dev/a", "/dev/b"}, "raid0"},
		{[]string{"add", "--spare", "/dev/c"}, "needs -n N"},
		{[]string{"add", "-n", "0", "--level", "1", "--spare", "/dev/c"}, "give its members"},
		{[]string{"run", "-l", "0", "--spare", "/dev/c", "/dev/a", "/dev/b"}, "raid0"},
	} {
		_, stderr, code := runCLI(withSocket(sock, tc.args)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
			t.Errorf("%v: error is %d lines, want one: %q", tc.args, n+1, stderr)
		}
	}
	if n := fake.Requests.Load(); n != 0 {
		t.Fatalf("usage errors reached the daemon %d times", n)
	}
}

// Without a daemon, its commands say how to start it, in one line, exit 1.
func TestManageNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	for _, args := range [][]string{
		{"add", "--level", "1", "/dev/a", "/dev/b"},
		{"detail", "-n", "0"},
		{"fail", "-n", "0", "/dev/a"},
		{"remove", "-n", "0", "/dev/a"},
		{"re-add", "-n", "0", "/dev/a"},
		{"replace", "-n", "0", "/dev/a"},
		{"check", "-n", "0"},
		{"repair", "-n", "0"},
	} {
		_, stderr, code := runCLI(withSocket(sock, args)...)
		if code != exitError || !strings.Contains(stderr, "no ublk-raid daemon is running") ||
			!strings.Contains(stderr, "systemctl start ublk-raid") || !strings.Contains(stderr, "ublk-raid serve") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
			t.Errorf("%v: error is %d lines, want one: %q", args, n+1, stderr)
		}
	}
	if _, stderr, code := runCLI("detail", "--test", "-n", "0", "--socket", sock); code != testError || !strings.Contains(stderr, "no ublk-raid daemon") {
		t.Errorf("detail --test without a daemon: exit %d, %q", code, stderr)
	}
}

// The commands against a fake daemon: what they print and their exit codes.
func TestManageCommands(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, stderr, code := runCLI(withSocket(sock, args)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d (want %d), stdout %q, stderr %q", args, code, wantCode, out, stderr)
		}
		return out + stderr
	}
	if out := run(0, "add", "--level", "1", "--name", "tank", "/dev/vdc", "/dev/vdd"); out != "/dev/ublkb0\n" {
		t.Fatalf("add printed %q", out)
	}
	if out := run(0, "add", "--level", "0", "-n", "4", "/dev/vde", "/dev/vdf"); out != "/dev/ublkb4\n" {
		t.Fatalf("add -n 4 printed %q", out)
	}
	out := run(1, "add", "--level", "0", "-n", "4", "/dev/vde", "/dev/vdf")
	if !strings.Contains(out, "/dev/ublkb4 already serves an array") {
		t.Fatalf("add on a taken number: %q", out)
	}
	out = run(0, "list")
	if !strings.Contains(out, "/dev/ublkb0  raid1") || !strings.Contains(out, "tank") || !strings.Contains(out, "/dev/vdc /dev/vdd") ||
		!strings.Contains(out, "/dev/ublkb4  raid0") {
		t.Fatalf("list:\n%s", out)
	}
	var lj listJSON
	if err := json.Unmarshal([]byte(run(0, "list", "-o", "json")), &lj); err != nil || !lj.Daemon || len(lj.Arrays) != 2 ||
		lj.Arrays[0].Device != "/dev/ublkb0" || lj.Arrays[0].Members[1].Path != "/dev/vdd" {
		t.Fatalf("list -o json: %+v %v", lj, err)
	}
	out = run(0, "detail", "-n", "0")
	for _, want := range []string{"/dev/ublkb0:\n", "Raid Level : raid1", "State : active", "Raid Devices : 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("detail lacks %q:\n%s", want, out)
		}
	}
	if !hasRow(out, "0 active /dev/vdc") || !hasRow(out, "1 active /dev/vdd") {
		t.Fatalf("detail's member table:\n%s", out)
	}
	run(0, "detail", "-n", "0", "--test")
	if out := run(0, "fail", "-n", "0", "/dev/vdd"); out != "set /dev/vdd faulty in /dev/ublkb0 (degraded)\n" {
		t.Fatalf("fail printed %q", out)
	}
	out = run(testDegraded, "detail", "-n", "0", "--test")
	if !hasRow(out, "1 faulty /dev/vdd") || !strings.Contains(out, "State : degraded") {
		t.Fatalf("detail after fail:\n%s", out)
	}
	var a daemon.Array
	if err := json.Unmarshal([]byte(run(testDegraded, "detail", "-n", "0", "-o", "json", "--test")), &a); err != nil ||
		a.Members[1].State != "faulty" || !a.Degraded {
		t.Fatalf("detail -o json: %+v %v", a, err)
	}
	if out := run(1, "fail", "-n", "0", "/dev/vdc"); !strings.Contains(out, "last copy") {
		t.Fatalf("failing the last copy: %q", out)
	}
	if out := run(1, "remove", "-n", "0", "/dev/vdc"); !strings.Contains(out, "fail it first") {
		t.Fatalf("removing an active member: %q", out)
	}
	if out := run(0, "remove", "-n", "0", "1"); out != "removed 1 from /dev/ublkb0 (degraded)\n" {
		t.Fatalf("remove by role printed %q", out)
	}
	if out := run(0, "list"); !strings.Contains(out, "1/2") {
		t.Fatalf("list after remove:\n%s", out)
	}
	for _, args := range [][]string{{"re-add", "-n", "0", "/dev/vdd"}, {"replace", "-n", "0", "/dev/vdc", "--with", "/dev/vdb"},
		{"check", "-n", "0"}, {"repair", "-n", "0"}} {
		if out := run(1, args...); !strings.Contains(out, args[0]+": not available yet") {
			t.Fatalf("%v: %q", args, out)
		}
	}
	if out := run(1, "detail", "-n", "3"); out != "/dev/ublkb3: no such array: not found" {
		t.Fatalf("detail of a missing array: %q", out)
	}
	fake.SetState(4, "failed")
	run(testFailed, "detail", "-n", "4", "--test")
	if out := run(0, "del", "-n", "4"); out != "deleted /dev/ublkb4\n" {
		t.Fatalf("del printed %q", out)
	}
	if out := run(0, "del", "--all"); out != "deleted /dev/ublkb0\n" {
		t.Fatalf("del --all printed %q", out)
	}
	if out := run(0, "list", "-o", "json"); !strings.Contains(out, `"arrays": []`) {
		t.Fatalf("list after del: %s", out)
	}
}

// withSocket puts --socket sock after the command name.
func withSocket(sock string, args []string) []string {
	return append([]string{args[0], "--socket", sock}, args[1:]...)
}

// hasRow reports whether out has a line whose fields are row's.
func hasRow(out, row string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == row {
			return true
		}
	}
	return false
}

// The last check's result stays in detail when a job follows it (a
// resync of regions first written during the check): scripts grep it.
func TestSyncLineKeepsLastCheck(t *testing.T) {
	for _, c := range []struct {
		y    array.SyncStatus
		want string
	}{
		{array.SyncStatus{Action: "idle"}, "Sync : idle"},
		{array.SyncStatus{Action: "idle", LastAction: "rebuild", LastResult: "ok"}, "Sync : idle, last rebuild: ok"},
		{array.SyncStatus{Action: "idle", LastAction: "check", LastResult: "ok", LastCheck: "check", LastCheckResult: "ok", MismatchCnt: 24},
			"Sync : idle, last check: ok, mismatch_cnt 24 (sectors)"},
		{array.SyncStatus{Action: "idle", LastAction: "resync", LastResult: "ok", LastCheck: "check", LastCheckResult: "ok"},
			"Sync : idle, last resync: ok, last check: ok, mismatch_cnt 0 (sectors)"},
	} {
		if got := syncLine(c.y); got != c.want {
			t.Errorf("syncLine(%+v) = %q, want %q", c.y, got, c.want)
		}
	}
}

// Done and Total of a job are read apart (resync.Syncer.Progress loads one
// atomic, then the other): between two jobs, the previous one's position
// can come with the next one's smaller end (a raid10 resync in array
// sectors followed by a rebuild in member sectors). detail must print
// such an answer, not panic on it.
func TestSyncLineDoneBeyondTotal(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("syncLine panicked: %v", r)
		}
	}()
	got := syncLine(array.SyncStatus{Action: "rebuild", Done: 4 << 30, Total: 2 << 30})
	if !strings.HasPrefix(got, "rebuild : [====================>] 100.0%") {
		t.Fatalf("syncLine = %q", got)
	}
}

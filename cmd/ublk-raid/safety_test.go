package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// wantUsage runs args against a fake daemon and wants exit 2, one line
// holding want, and no request reaching the daemon.
func wantUsage(t *testing.T, fake *daemontest.Backend, sock string, args []string, want string) {
	t.Helper()
	before := fake.Requests.Load()
	_, stderr, code := runCLI(withSocket(sock, args)...)
	if code != exitUsage || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("%q: exit %d, stderr %q; want exit %d and one line with %q", args, code, stderr, exitUsage, want)
	}
	if n := fake.Requests.Load() - before; n != 0 {
		t.Errorf("%q reached the daemon %d times", args, n)
	}
}

// Item 4: a size whose suffix overflows 63 bits is bad usage, not the
// wrapped value (18014398509481988K was taken as 4K).
func TestSizeOverflow(t *testing.T) {
	for _, in := range []string{"18014398509481988K", "18014398509482048K", "8796093022208M", "8589934592G",
		"9223372036854775808", "99999999999999999999K"} {
		if v, err := parseSize(in); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("parseSize(%q) = %d, %v; want too large", in, v, err)
		}
	}
	if v, err := parseSize("8589934591G"); err != nil || v != 8589934591<<30 {
		t.Errorf("parseSize(8589934591G) = %d, %v", v, err)
	}
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, tc := range []struct{ flag, v string }{
		{"--chunk", "18014398509481988K"}, {"--bitmap-region", "18014398509482048K"}, {"--max-io", "18014398509481988K"},
		{"--sync-speed-min", "18014398509481988K"}, {"--sync-speed-max", "18014398509481988K"},
	} {
		for _, cmd := range []string{"add", "run"} {
			wantUsage(t, fake, sock, []string{cmd, "--level", "1", tc.flag, tc.v, "/dev/a", "/dev/b"}, tc.flag)
		}
	}
	wantUsage(t, fake, sock, []string{"passthrough", "--max-io", "18014398509481988K", "/dev/a"}, "too large")
}

// Item 6: an explicit --chunk 0 or --bitmap-region 0 is bad usage; left
// out, the defaults stand.
func TestExplicitZeroSizes(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, cmd := range []string{"add", "run"} {
		wantUsage(t, fake, sock, []string{cmd, "--level", "0", "--chunk", "0", "/dev/a", "/dev/b"}, "--chunk 0")
		wantUsage(t, fake, sock, []string{cmd, "--level", "0", "-c", "0K", "/dev/a", "/dev/b"}, "--chunk 0K")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "--bitmap-region", "0", "/dev/a", "/dev/b"}, "--bitmap-region 0")
	}
	out, stderr, code := runCLI("add", "--socket", sock, "--level", "0", "/dev/a", "/dev/b")
	if code != 0 {
		t.Fatalf("add with the default chunk: exit %d %s", code, stderr)
	}
	a, err := daemon.NewClient(sock).Detail(0)
	if err != nil || a.ChunkBytes != 512<<10 || out != "/dev/ublkb0\n" {
		t.Fatalf("default chunk: %q %+v %v", out, a, err)
	}
}

// Item 7: --name must be UTF-8 text without control characters; it is
// refused (exit 2), not stored altered.
func TestNameNotText(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, name := range []string{"t\xffnk", "\xc3", "tank\n", "ta\x00nk", "\x1b[2J", "t\ufffdnk"} {
		for _, cmd := range []string{"add", "run"} {
			wantUsage(t, fake, sock, []string{cmd, "--level", "1", "--name", name, "/dev/a", "/dev/b"}, "--name ")
		}
	}
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "--name", "tänk", "/dev/a", "/dev/b"); code != 0 {
		t.Fatalf("a UTF-8 name: exit %d %s", code, stderr)
	}
}

// Item 10: bad usage found without touching anything exits 2: a member
// given twice under any name, an invalid name, an unknown command; and
// a 400 from the daemon (it did not act) is bad usage too.
func TestUsageExitsTwo(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "m0")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(img, link); err != nil {
		t.Fatal(err)
	}
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, cmd := range []string{"add", "run"} {
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "/dev/vda", "/dev/vda"}, "given twice")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "/dev/vda", "/dev/../dev/vda"}, "given twice")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", img, link}, "given twice")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "--spare", link, img, "/dev/vdb"}, "--spare")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "--name", "a\tb", "/dev/vda", "/dev/vdb"}, "--name")
		wantUsage(t, fake, sock, []string{cmd, "--level", "1", "--name", "a/b", "/dev/vda", "/dev/vdb"}, "--name")
	}
	wantUsage(t, fake, sock, []string{"fail", "-n", "0", "/dev/vd\xff"}, "not UTF-8 text")
	wantUsage(t, fake, sock, []string{"add", "-n", "0", "--spare", "/dev/vd\xfe"}, "not UTF-8 text")
	wantUsage(t, fake, sock, []string{"replace", "-n", "0", "/dev/vda", "--with", "/dev/vd\x01"}, "not UTF-8 text")
	for _, args := range [][]string{{"lst"}, {"bogus", "extra"}, {"examin", "/dev/vda"}} {
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.HasPrefix(stderr, "unknown command") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
	if out, _, code := runCLI(); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("no command: exit %d, %q; want the help", code, out)
	}
	// What only the daemon can refuse as malformed (here: add-spare
	// without a device, which the fake answers 400) exits 2 too.
	if code := exitCode(&daemon.RemoteError{Status: 400, Msg: "x"}); code != exitUsage {
		t.Errorf("a 400 answer: exit %d", code)
	}
	for _, status := range []int{404, 409, 500, 501} {
		if code := exitCode(&daemon.RemoteError{Status: status, Msg: "x"}); code != exitError {
			t.Errorf("a %d answer: exit %d", status, code)
		}
	}
	bad := badBackend{daemontest.New()}
	bsock := daemontest.Serve(t, bad)
	if _, stderr, code := runCLI("add", "--socket", bsock, "--level", "1", "/dev/vda", "/dev/vdb"); code != exitUsage || stderr != "refused as malformed" {
		t.Errorf("add answered 400: exit %d, %q", code, stderr)
	}
}

// badBackend answers every add with 400.
type badBackend struct{ *daemontest.Backend }

func (badBackend) Add(context.Context, daemon.AddRequest) (daemon.Array, error) {
	return daemon.Array{}, daemon.Invalid(errors.New("refused as malformed"))
}

// Item 11: examine and examine-bitmap refuse what is neither a block
// device nor a regular file with add's one line (exit 1).
func TestExamineFileType(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"examine", "examine-bitmap"} {
		for _, p := range []string{"/dev/null", dir} {
			_, stderr, code := runCLI(cmd, p)
			if code != exitError || stderr != "member "+p+" is neither a block device nor a regular file" {
				t.Errorf("%s %s: exit %d, %q", cmd, p, code, stderr)
			}
		}
	}
}

// Every AddRequest field has its flag in requestFlags (the table that
// replaced rewriting messages by string replacement), and a FieldError
// comes out naming the flag and the size as given.
func TestRequestFlags(t *testing.T) {
	rt := reflect.TypeOf(daemon.AddRequest{})
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if _, ok := requestFlags[name]; !ok {
			t.Errorf("AddRequest field %q has no flag in requestFlags", name)
		}
	}
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	wantUsage(t, fake, sock, []string{"add", "--level", "0", "--chunk", "3K", "/dev/a", "/dev/b"}, "--chunk 3K: must be a power of two")
	wantUsage(t, fake, sock, []string{"add", "--level", "1", "--no-bitmap", "--bitmap-region", "1M", "/dev/a", "/dev/b"},
		"--bitmap-region 1M: contradicts --no-bitmap")
	wantUsage(t, fake, sock, []string{"add", "--level", "1", "--sync-speed-min", "2M", "--sync-speed-max", "1M", "/dev/a", "/dev/b"},
		"--sync-speed-min 2M: is above --sync-speed-max")
	wantUsage(t, fake, sock, []string{"add", "--level", "1", "--layout", "f2", "/dev/a", "/dev/b"}, `--layout "f2": is for raid5, raid6 and raid10 only`)
	wantUsage(t, fake, sock, []string{"add", "--level", "0", "/dev/a"}, "members: raid0 needs 2")
}

// add sends absolute paths: the daemon does not run in this directory.
func TestAddAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "--write-mostly", "b", "a", "./b"); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	a, err := daemon.NewClient(sock).Detail(0)
	if err != nil || len(a.Members) != 2 || a.Members[0].Path != filepath.Join(dir, "a") || a.Members[1].Path != filepath.Join(dir, "b") {
		t.Fatalf("members sent: %+v %v", a.Members, err)
	}
}

// -q above what the kernel makes is said on stderr (the fake stands for a
// kernel with 2 CPUs).
func TestQueuesWarning(t *testing.T) {
	sock := daemontest.Serve(t, twoCPUs{daemontest.New()})
	out, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "-q", "1000", "/dev/a", "/dev/b")
	if code != 0 || out != "/dev/ublkb0\n" || stderr != "ublk-raid: warning: --queues 1000: the device has 2 (the kernel makes at most one per CPU)\n" {
		t.Fatalf("add -q 1000: exit %d, %q, %q", code, out, stderr)
	}
	if _, stderr, _ := runCLI("add", "--socket", sock, "--level", "1", "-q", "2", "/dev/c", "/dev/d"); stderr != "" {
		t.Fatalf("add -q 2: %q", stderr)
	}
	for _, cmd := range []string{"add", "run", "passthrough"} {
		if out, _, _ := runCLI(cmd, "--help"); !strings.Contains(out, "cut to one per CPU, with a warning") {
			t.Errorf("%s --help does not say what -q above the CPUs does:\n%s", cmd, out)
		}
	}
}

// twoCPUs makes devices with at most 2 queues, as the kernel does on a
// 2-CPU machine.
type twoCPUs struct{ *daemontest.Backend }

func (b twoCPUs) Add(ctx context.Context, req daemon.AddRequest) (daemon.Array, error) {
	a, err := b.Backend.Add(ctx, req)
	a.Queues = min(max(req.Queues, 1), 2)
	return a, err
}

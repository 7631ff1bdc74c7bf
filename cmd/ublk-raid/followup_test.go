package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
	"github.com/ublk-raid/ublk-raid/engine"
)

// mirrorFiles makes a clean raid1 with a bitmap over two sparse files of
// size bytes and returns them.
func mirrorFiles(t *testing.T, size int64) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return paths
}

// craftSuperblock rewrites p's superblock after edit.
func craftSuperblock(t *testing.T, p string, edit func(sb *engine.Superblock)) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, engine.SuperblockSize)
	if _, err := f.ReadAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	sb, err := engine.ParseSuperblock(b)
	if err != nil {
		t.Fatal(err)
	}
	edit(sb)
	if b, err = sb.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
}

// examine-bitmap bounds the superblock by its device before it reads the
// bitmap area, as assembly does: a superblock whose data area ends past
// the member's end is reported, not trusted.
func TestExamineBitmapChecksMemberSize(t *testing.T) {
	const size = 64 << 20
	p := mirrorFiles(t, size)[1]
	craftSuperblock(t, p, func(sb *engine.Superblock) { sb.DataSectors = (size-sb.DataOffset)>>9 + 8 })
	_, stderr, code := runCLI("examine-bitmap", p)
	if code != exitError || !strings.Contains(stderr, "past the member's end") || strings.Contains(stderr, "\n") {
		t.Fatalf("examine-bitmap of a superblock larger than its member: exit %d, %q; want exit 1 naming the member's end", code, stderr)
	}
}

// examine-bitmap reads at most bitmap.MaxCopyBytes of a bitmap area,
// however large the superblock says it is (up to 128 MiB), and still
// decodes the copy.
func TestExamineBitmapReadsAtMostMaxCopyBytes(t *testing.T) {
	const size = 256 << 20
	p := mirrorFiles(t, size)[1]
	craftSuperblock(t, p, func(sb *engine.Superblock) {
		sb.BitmapBytes = 128 << 20 // engine.MaxBitmapBytes
		sb.DataOffset = (sb.BitmapOffset + sb.BitmapBytes + 1<<20 - 1) &^ (1<<20 - 1)
		sb.DataSectors = (size - sb.DataOffset) >> 9 &^ 7
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, stderr, code := runCLI("examine-bitmap", p)
	runtime.ReadMemStats(&after)
	if code != 0 || !strings.Contains(out, "Region Size") {
		t.Fatalf("examine-bitmap: exit %d, %q\n%s", code, stderr, out)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("examine-bitmap allocated %d bytes for a 128 MiB bitmap area; want at most a few MiB (bitmap.MaxCopyBytes)", got)
	}
}

// spareServer is a daemon's add-spare endpoint that refuses any request
// naming refused and records the devices of the others as added.
type spareServer struct {
	refused string
	mu      sync.Mutex
	added   []string
}

func (s *spareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct { // as daemon.MemberRequest has them
		Member  string   `json:"member"`
		Members []string `json:"members"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(daemon.ErrorBody{Error: err.Error()})
		return
	}
	devs := req.Members
	if req.Member != "" {
		devs = append(devs, req.Member)
	}
	if slices.Contains(devs, s.refused) {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(daemon.ErrorBody{Error: "add spare " + s.refused + ": it carries ext4 filesystem (at byte 1080); --force overwrites it"})
		return
	}
	s.mu.Lock()
	s.added = append(s.added, devs...)
	s.mu.Unlock()
	json.NewEncoder(w).Encode(daemon.Array{Number: 0, Device: "/dev/ublkb0", State: "active"})
}

// add -n N --spare A --spare B is all or nothing: when the daemon
// refuses B, A is not left a spare (the devices go in one request that
// the daemon checks whole).
func TestAddSparesAllOrNothing(t *testing.T) {
	srv := &spareServer{refused: "/dev/vdf"}
	sock := filepath.Join(t.TempDir(), "control.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	_, stderr, code := runCLI("add", "--socket", sock, "-n", "0", "--spare", "/dev/vde", "--spare", "/dev/vdf")
	if code != exitError || !strings.Contains(stderr, "/dev/vdf") {
		t.Fatalf("add --spare /dev/vde --spare /dev/vdf: exit %d, %q; want the refusal of /dev/vdf", code, stderr)
	}
	if len(srv.added) != 0 {
		t.Fatalf("the daemon refused /dev/vdf but added %v", srv.added)
	}
	out, stderr, code := runCLI("add", "--socket", sock, "-n", "0", "--spare", "/dev/vde", "--spare", "/dev/vdg")
	if code != 0 || !slices.Equal(srv.added, []string{"/dev/vde", "/dev/vdg"}) ||
		out != "added /dev/vde as a spare of /dev/ublkb0\nadded /dev/vdg as a spare of /dev/ublkb0\n" {
		t.Fatalf("add of two good spares: exit %d, %q %q; added %v", code, out, stderr, srv.added)
	}
}

// fail, remove, re-add and replace send member paths absolute, as add
// does (the daemon refuses relative ones); role numbers as they are.
func TestMemberCommandsSendAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "a", "b", "c"); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI("fail", "--socket", sock, "-n", "0", "b"); code != 0 {
		t.Fatalf("fail -n 0 b (in the members' directory): exit %d %q", code, stderr)
	}
	if _, stderr, code := runCLI("fail", "--socket", sock, "-n", "0", "2"); code != 0 {
		t.Fatalf("fail -n 0 2 (a role number): exit %d %q", code, stderr)
	}
	a, err := daemon.NewClient(sock).Detail(0)
	if err != nil || a.Members[1].State != "faulty" || a.Members[2].State != "faulty" {
		t.Fatalf("after fail: %+v %v", a.Members, err)
	}
}

// run takes relative paths (it runs in their directory): it makes them
// absolute before the request rules that refuse relative paths.
func TestRunRelativePaths(t *testing.T) {
	t.Chdir(t.TempDir())
	_, stderr, code := runCLI("run", "--level", "1", "--write-mostly", "b", "a", "./b")
	if code == exitUsage || strings.Contains(stderr, "relative") {
		t.Fatalf("run with relative paths: exit %d, %q", code, stderr)
	}
}

package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review. add without --level assembles from the superblocks:
// --chunk ("chunk size for a new array") describes a new array, as
// --layout, --no-bitmap, --bitmap-region and --assume-clean do, which an
// assembly refuses (exit 2). An explicit --chunk on an assembly was
// silently dropped while the array was assembled with its recorded chunk.
// A new array still gets the chunk it got before: the one given, or
// 512K.
func TestAssembleRefusesChunk(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	wantUsage(t, fake, sock, []string{"add", "--chunk", "64K", "/dev/a", "/dev/b"}, "--chunk")
	// The daemon refuses it too, for other clients.
	_, err := daemon.AddRequest{Members: []string{"/dev/a", "/dev/b"}, ChunkBytes: 64 << 10}.Spec()
	if fe := (*daemon.FieldError)(nil); !errors.As(err, &fe) || fe.Field != "chunk_bytes" {
		t.Errorf("assembly with chunk_bytes: %v, want a chunk_bytes error", err)
	}
	for _, c := range []struct {
		args []string
		want uint64
	}{
		{[]string{"add", "-n", "0", "--level", "0", "/dev/a", "/dev/b"}, 512 << 10},
		{[]string{"add", "-n", "1", "--level", "0", "--chunk", "64K", "/dev/c", "/dev/d"}, 64 << 10},
		{[]string{"add", "-n", "2", "--level", "10", "--chunk", "64K", "/dev/e", "/dev/f"}, 64 << 10},
	} {
		if _, stderr, code := runCLI(withSocket(sock, c.args)...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, stderr)
		}
		out, stderr, code := runCLI("detail", "--socket", sock, "-n", c.args[2], "-o", "json")
		var a daemon.Array
		if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.ChunkBytes != c.want {
			t.Errorf("%v: chunk %d (exit %d %s), want %d", c.args, a.ChunkBytes, code, stderr, c.want)
		}
	}
}

// Found by review. raid0 has nothing to resync, rebuild or check (no
// redundancy): as --bitmap-region, --spare and --write-mostly are refused
// for it (exit 2), so are the sync speed flags, which were dropped
// unsaid.
func TestRaid0RefusesSyncSpeeds(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	wantUsage(t, fake, sock, []string{"add", "--level", "0", "--sync-speed-max", "10M", "/dev/a", "/dev/b"}, "--sync-speed-max")
	wantUsage(t, fake, sock, []string{"add", "--level", "0", "--sync-speed-min", "5M", "/dev/a", "/dev/b"}, "--sync-speed-min")
	// The same flags stay accepted where there is redundancy.
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "--sync-speed-max", "10M", "/dev/a", "/dev/b"); code != 0 {
		t.Errorf("raid1 with --sync-speed-max: exit %d %s", code, stderr)
	}
}

// Found by review. mdadm refuses a chunk size for raid1 ("specifying
// chunk size is forbidden for this level"): a mirror has no chunks, so a
// --chunk given for one is a mistake about the level. It was accepted
// and recorded. Exit 2, naming --chunk, from add and run alike.
func TestRaid1RefusesChunk(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	wantUsage(t, fake, sock, []string{"add", "--level", "1", "--chunk", "64K", "/dev/a", "/dev/b"}, "--chunk")
	if _, stderr, code := runCLI("run", "--level", "1", "--chunk", "64K", "/dev/a", "/dev/b"); code != 2 || !strings.Contains(stderr, "--chunk") {
		t.Errorf("run --level 1 --chunk: exit %d %q, want 2 naming --chunk", code, stderr)
	}
	if _, stderr, code := runCLI(withSocket(sock, []string{"add", "--level", "1", "/dev/a", "/dev/b"})...); code != 0 {
		t.Errorf("raid1 without --chunk: exit %d %s", code, stderr)
	}
}

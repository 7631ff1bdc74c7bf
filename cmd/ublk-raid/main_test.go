package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/ublk"
)

func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.Execute()
	if err != nil {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), exitCode(err)
}

func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"passthrough"}, "expected 1 argument"},
		{[]string{"passthrough", "a", "b"}, "expected 1 argument"},
		{[]string{"passthrough", "-d", "0", "/dev/x"}, "--depth 0"},
		{[]string{"passthrough", "-d", "5000", "/dev/x"}, "--depth 5000"},
		{[]string{"passthrough", "-q", "-1", "/dev/x"}, "--queues -1"},
		{[]string{"passthrough", "-n", "-2", "/dev/x"}, "--number -2"},
		{[]string{"passthrough", "--max-io", "3000", "/dev/x"}, "--max-io"},
		{[]string{"passthrough", "--max-io", "64M", "/dev/x"}, "--max-io"},
		{[]string{"passthrough", "--max-io", "lots", "/dev/x"}, "--max-io"},
		{[]string{"passthrough", "--scheduler", "None", "/dev/x"}, "--scheduler"},
		{[]string{"passthrough", "--bogus", "/dev/x"}, "unknown flag"},
		{[]string{"passthrough", "--log-level", "loud", "/dev/x"}, "--log-level"},
		{[]string{"recover", "/dev/x"}, "needs -n"},
		{[]string{"del"}, "exactly one of"},
		{[]string{"del", "-n", "1", "--all"}, "exactly one of"},
		{[]string{"del", "-n", "x"}, "invalid argument"},
		{[]string{"list", "extra"}, "expected 0 argument"},
		{[]string{"run", "-l", "1", "--write-mostly", "/dev/z", "/dev/x", "/dev/y"}, "not one of the members"},
		{[]string{"run", "-l", "0", "--write-mostly", "/dev/x", "/dev/x", "/dev/y"}, "raid0"},
	} {
		_, stderr, code := runCLI(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
			t.Errorf("%v: error is %d lines, want one: %q", tc.args, n+1, stderr)
		}
	}
}

// Without the driver, a valid command says how to load it, before it
// touches the member.
func TestCLINoDriver(t *testing.T) {
	if _, err := os.Stat(ublk.ControlPath); err == nil {
		t.Skip("this machine has ublk_drv loaded; the VM's bad-input scenario covers this case")
	}
	member := t.TempDir() + "/m"
	if err := os.WriteFile(member, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI("passthrough", member)
	if code != exitError || !strings.Contains(stderr, "modprobe ublk_drv") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	b, _ := os.ReadFile(member)
	if !bytes.Equal(b, make([]byte, 2<<20)) {
		t.Fatal("member was written")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4K": 4096, "512k": 512 << 10, "1M": 1 << 20, "2G": 2 << 30, "4T": 4 << 40, "2t": 2 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5M", "12X", "8388608T"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCLI("version")
	if code != 0 || !strings.HasPrefix(out, "ublk-raid ") {
		t.Fatalf("version: %q exit %d", out, code)
	}
}

package ublk

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestConfigValidateScheduler(t *testing.T) {
	base := Config{ID: -1}
	base.Params.Basic = ParamBasic{LogicalBSShift: 9, PhysicalBSShift: 12, DevSectors: 1 << 20}
	for _, s := range []string{"", "none", "mq-deadline", "bfq", "kyber"} {
		c := base
		c.Scheduler = s
		if err := c.Validate(); err != nil {
			t.Errorf("Scheduler %q: %v", s, err)
		}
	}
	for _, s := range []string{"none\n", "../x", "None", "a b", strings.Repeat("x", 33)} {
		c := base
		c.Scheduler = s
		if err := c.Validate(); err == nil {
			t.Errorf("Scheduler %q: accepted", s)
		}
	}
}

func TestQueueAffinity(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Skip(err)
	}
	first := firstCPU(&all)
	var queue unix.CPUSet // the kernel maps the first CPU to the queue
	queue.Set(first)
	own := queueAffinity(CPUsOwn, &queue)
	if own == nil || own.Count() != 1 || !own.IsSet(first) {
		t.Fatalf("own: %v, want CPU %d only", own, first)
	}
	others := queueAffinity(CPUsOthers, &queue)
	if all.Count() == 1 {
		if others != nil {
			t.Fatalf("others on one CPU: %v, want unpinned", others)
		}
		return
	}
	if others == nil || others.IsSet(first) || others.Count() != all.Count()-1 {
		t.Fatalf("others: %v, want every allowed CPU but %d", others, first)
	}
	// A queue whose CPUs are all the process may use: nowhere else to go.
	if got := queueAffinity(CPUsOthers, &all); got != nil {
		t.Fatalf("others of a queue mapped every CPU: %v, want unpinned", got)
	}
	for _, s := range []string{"own", "others", "any"} {
		if c, err := ParseQueueCPUs(s); err != nil || string(c) != s {
			t.Fatalf("ParseQueueCPUs(%q) = %q, %v", s, c, err)
		}
	}
	if _, err := ParseQueueCPUs("all"); err == nil {
		t.Fatal("ParseQueueCPUs accepted all")
	}
	c := Config{ID: -1, CPUs: "bogus"}
	c.Params.Basic = ParamBasic{LogicalBSShift: 9, PhysicalBSShift: 12, DevSectors: 1 << 20}
	if err := c.Validate(); err == nil {
		t.Fatal("Validate accepted queue CPUs bogus")
	}
}

package ublk

import (
	"strings"
	"testing"
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

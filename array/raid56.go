package array

import (
	"errors"
	"fmt"

	"github.com/ublk-raid/ublk-raid/engine"
)

// raid5 and raid6 at the array level. The engine has their superblock,
// assembly rules, geometry, planners and request executor, but the array
// does not serve them yet: no queue handler runs the ParityExecutor, the
// syncer (resync, rebuild, check) only knows copies, and the bitmap's
// first-write fill and never-written regions are not mapped to parity
// trust. Until they are, a parity array is refused, before anything is
// written, both when asked to create one and when members carrying one
// are assembled (docs/raid56.md, "Not done").

// ErrParityNotServed refuses creating or assembling a raid5/6 array.
var ErrParityNotServed = errors.New("raid5/6 arrays are not served yet (issue 14): this build can examine their members but not run them")

// refuseParity returns an error wrapping ErrParityNotServed if level is
// raid5 or raid6; what names the array or request in the message.
func refuseParity(level engine.Level, what string) error {
	if !engine.IsParityLevel(level) {
		return nil
	}
	return fmt.Errorf("%s is %s: %w; nothing was written", what, level, ErrParityNotServed)
}

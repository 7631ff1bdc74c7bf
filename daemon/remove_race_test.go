package daemon

import (
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// hookLog is a logger that runs f (once) when a message msg is logged.
func hookLog(msg string, f func()) *zap.Logger {
	done := false
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.DebugLevel)
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == msg && !done {
			done = true
			f()
		}
		return nil
	}))
}

// A re-add (or add-spare) of a device arriving while Remove lets it go
// waits until Remove has updated the state file: otherwise it was
// recorded, then Remove dropped the path, and the next daemon start
// assembled the array without the device it holds.
func TestRemoveRacingReAddKeepsStateFile(t *testing.T) {
	for _, kind := range []string{"member", "spare"} {
		t.Run(kind, func(t *testing.T) {
			paths := files(t, 3, 8<<20)
			spec := array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}
			if kind == "spare" {
				spec.Spares = paths[2:]
			}
			n := 2
			if kind == "spare" {
				n = 3
			}
			a, err := array.Open(paths[:2], spec, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Close)
			target := paths[1]
			if kind == "spare" {
				target = paths[2]
			} else if err := a.Fail(1); err != nil {
				t.Fatal(err)
			}
			var m *Manager
			var s *served
			hookMsg := map[string]string{"member": "member removed", "spare": "spare removed"}[kind]
			var raceErr error
			raced := make(chan struct{})
			log := hookLog(hookMsg, func() {
				// A second management command, arriving just now.
				go func() {
					defer close(raced)
					if kind == "member" {
						_, raceErr = m.ReAdd(0, target)
					} else {
						_, raceErr = m.AddSpare(0, []string{target}, false)
					}
				}()
				time.Sleep(50 * time.Millisecond) // (it runs, or waits for Remove)
			})
			state := filepath.Join(t.TempDir(), "arrays.json")
			m = NewManager(nil, ManagerOptions{Log: log, StateFile: state})
			s = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{UUID: a.Status().UUID, Members: slices.Clone(paths[:n])}}
			m.arrays[0] = s
			if _, err := m.Remove(0, target); err != nil {
				t.Fatal(err)
			}
			<-raced
			if raceErr != nil {
				t.Fatalf("the concurrent command was refused: %v", raceErr)
			}
			a.WaitSync()
			held := a.RoleOf(target) >= 0 || slices.Contains(a.Spares(), target)
			st, err := LoadState(state)
			if err != nil || len(st.Arrays) != 1 {
				t.Fatalf("state file: %+v %v", st, err)
			}
			listed := slices.Contains(st.Arrays[0].Members, target)
			if held != listed {
				t.Errorf("after remove racing a %s of %s: array holds it %v, state file lists it %v (%v)", kind, target, held, listed, st.Arrays[0].Members)
			}
		})
	}
}

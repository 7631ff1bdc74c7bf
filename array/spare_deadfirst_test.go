package array

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A first spare that cannot take the failed role (dead since it was
// added: raid5/6 refuse it when its write-hole log area cannot be reset)
// must not keep a good second spare out: md goes on to the next spare.
// It used to go back in front, the role left faulty and the array
// degraded with a working spare standing by.
func TestDeadFirstSpareDoesNotBlockTheNext(t *testing.T) {
	for _, level := range []engine.Level{engine.Level1, engine.Level5} {
		t.Run(level.String(), func(t *testing.T) {
			n := 3
			paths := memberFiles(t, n+2, 16<<20)
			var dead atomic.Bool
			spec := CreateSpec{Level: level, NoBitmap: true, AssumeClean: true, ChunkSectors: 16,
				OpenDevice: func(p string) (Device, error) {
					d, err := openFile(p)
					if err != nil || p != paths[n] {
						return d, err
					}
					return deadLater{d, &dead}, nil
				}}
			if level == engine.Level5 {
				spec.ParityLayout = engine.LeftSymmetric
			}
			a, err := Open(paths[:n], spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := a.AddSpares(paths[n:], false); err != nil {
				t.Fatal(err)
			}
			dead.Store(true)
			if err := a.Fail(1); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				a.WaitSync()
				if a.Status().ActiveDisks == n {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			st := a.Status()
			if st.ActiveDisks != n {
				t.Fatalf("a dead first spare kept the good second spare (%s) out: %+v, spares %v", paths[n+1], st.Members, a.Spares())
			}
		})
	}
}

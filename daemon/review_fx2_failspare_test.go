package daemon

import (
	"net/http"
	"testing"
	"time"
)

// Found by review (fx2). The everyday hot-spare case of f89fbaf's "fail of a faulty
// member answers 0": the daemon fails a member on an I/O error (here:
// the array fails it, as a queue does), the spare standing by takes its
// role at once, and the operator's `fail X && remove X` runs. md keeps the
// faulty rdev in the array (listed faulty) until it is removed, whether a
// spare took over or not: mdadm --fail X answers 0 (md_error of a Faulty
// rdev does nothing) and --remove X answers 0. Here the fail is refused,
// so the script stops exactly as the fix meant it no longer would.
func TestReviewfx2FailOfMemberASpareReplacedSucceeds(t *testing.T) {
	const size = 8 << 20
	m, a, paths := servedMirror(t, size)
	sp := files(t, 1, size)[0]
	if err := a.AddSpare(sp); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil { // (the daemon's own failure of it)
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Members[1].Path != sp {
		if time.Now().After(deadline) {
			t.Fatalf("the spare did not take role 1: %+v", a.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.WaitSync()
	code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": paths[1]})
	if code != http.StatusOK {
		t.Errorf("fail %s (failed by the daemon, its role taken by the spare): %d %q; want 200 as mdadm --fail of a faulty member answers", paths[1], code, msg)
	}
	code, msg = post(t, m, "/arrays/0/remove", map[string]string{"member": paths[1]})
	if code != http.StatusOK {
		t.Errorf("remove %s after it: %d %q", paths[1], code, msg)
	}
}

package engine

import "testing"

// TestRaid56ExecutorStats runs requests whose plans are known and checks
// what the executor's counters say of them.
func TestRaid56ExecutorStats(t *testing.T) {
	g := raid56Geo(Level5, 5) // 4 data chunks of 8 sectors a stripe, 4 stripes
	w := newPWorld(t, g, 2, 1, 64<<10)
	st := &w.execs[0].Stats
	writes := func() (c [NumParityStatWrites]uint64) {
		for k := range c {
			c[k] = st.Writes[k].Load()
		}
		return c
	}
	n := uint32(g.ArraySectors())
	data := make([]byte, n<<9)
	fill(data, 1)
	if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
		t.Fatal(err)
	}
	if c := writes(); c != [NumParityStatWrites]uint64{ParityStatFull: g.Stripes()} {
		t.Fatalf("after writing every stripe whole: %v, want %d full", c, g.Stripes())
	}
	// One sector: RMW reads 2 chunks, RCW 3.
	if err := w.do(t, 0, ReqWrite, 1, 1, data[:512]); err != nil {
		t.Fatal(err)
	}
	// Three chunks of four: RCW reads 1, RMW 4.
	if err := w.do(t, 0, ReqWrite, 32, 24, data[:24<<9]); err != nil {
		t.Fatal(err)
	}
	if c := writes(); c[ParityStatRMW] != 1 || c[ParityStatRCW] != 1 || c[ParityStatFull] != g.Stripes() {
		t.Fatalf("after an RMW and an RCW: %v", c)
	}
	// A request that fails counts nowhere; a flush or an empty write has
	// no segments.
	if err := w.do(t, 0, ReqWrite, g.ArraySectors(), 8, data); err == nil {
		t.Fatal("write past the end accepted")
	}
	if err := w.do(t, 0, ReqWrite, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.do(t, 0, ReqFlush, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if c := writes(); c[ParityStatRMW]+c[ParityStatRCW] != 2 || st.ReconstructReads.Load() != 0 {
		t.Fatalf("a failed write, a flush or an empty write counted: %v, reconstruct reads %d", c, st.ReconstructReads.Load())
	}
	// A read of two stripes' first chunks, the member of stripe 1's lost:
	// one segment rebuilt.
	_, _, mem, _ := g.LocateData(32)
	w.members[mem].dead = true
	if err := w.do(t, 0, ReqRead, 32, 8, make([]byte, 8<<9)); err != nil {
		t.Fatal(err)
	}
	if err := w.do(t, 0, ReqRead, 0, 8, make([]byte, 8<<9)); err != nil {
		t.Fatal(err)
	}
	if got := st.ReconstructReads.Load(); got != 1 {
		t.Fatalf("reconstruct reads %d, want 1", got)
	}
	// A write to the stripe of the lost chunk, not to it: the parity
	// member is written, the lost chunk counts in what RCW/RMW read.
	if err := w.do(t, 0, ReqWrite, 40, 8, data[:8<<9]); err != nil {
		t.Fatal(err)
	}
	if c := writes(); c[ParityStatRMW]+c[ParityStatRCW]+c[ParityStatReconstruct] != 3 {
		t.Fatalf("the degraded write not counted: %v", c)
	}
	// A write on another queue waits for the stripe the first holds.
	w.execs[0].Start(0, ReqWrite, 64, 4, false, data[:4<<9])
	w.execs[1].Start(0, ReqWrite, 72, 4, false, data[:4<<9])
	w.settle()
	if a, b := st.StripeWaits.Load(), w.execs[1].Stats.StripeWaits.Load(); a != 0 || b != 1 {
		t.Fatalf("stripe waits %d and %d, want 0 and 1", a, b)
	}
}

// TestRaid56ExecutorStatsLog: every log entry written counts.
func TestRaid56ExecutorStatsLog(t *testing.T) {
	g := raid56Geo(Level6, 5)
	w := newPWorld(t, g, 1, 1, 64<<10)
	w.enableLog(t, 1<<20, 64<<10)
	entries := 0
	w.logHook = func(o pOp) { entries++ }
	data := make([]byte, 20<<9)
	fill(data, 2)
	// Stripe 0 (3 data chunks of 8 sectors), two segments: rows 0-4 write
	// chunks 1 and 2, rows 4-8 all three.
	if err := w.do(t, 0, ReqWrite, 4, 20, data); err != nil {
		t.Fatal(err)
	}
	// An entry a segment, each written to P and Q.
	if got := w.execs[0].Stats.LogEntries.Load(); got != 2 || entries != 4 {
		t.Fatalf("log entries counted %d, written %d times; want 2 entries, 4 writes", got, entries)
	}
}

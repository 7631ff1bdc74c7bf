package metrics

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden")

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// fakeSource returns two arrays that together exercise every metric:
// ublkb0, a raid1 recovering onto its second member, with a bitmap; and
// ublkb1, a raid10 with one member failed, one slot empty and a spare,
// without a bitmap; ublkb2, a raid5 with its parity counters.
func fakeSource() Source {
	return SourceFunc(func() []ArrayStats {
		lat := func(ds ...time.Duration) HistogramSnapshot {
			var h Histogram
			for _, d := range ds {
				h.Observe(d)
			}
			return h.Snapshot()
		}
		op := func(ops, bytes, errors uint64, ds ...time.Duration) OpStats {
			return OpStats{Ops: ops, Bytes: bytes, Errors: errors, Latency: lat(ds...)}
		}
		us := time.Microsecond
		ms := time.Millisecond
		return []ArrayStats{
			{
				Device: "ublkb0", Name: "data", Level: "raid1",
				State:           ArrayRecovering,
				RaidDisks:       2,
				Size:            1 * gib,
				Synced:          256 * mib,
				SyncSpeed:       100 * mib,
				ReadRepairs:     5,
				MismatchSectors: 16,
				Bitmap: &BitmapStats{
					Regions: 16, DirtyRegions: 3,
					BlockWrites: 42, DataWrites: 1000, Waited: 3,
					Wait: lat(150*us, 180*us, 2*ms),
				},
				Members: []MemberStats{
					{Name: "nvme0n1", State: MemberActive, Ops: [NumOps]OpStats{
						OpRead:    op(4, 4*4*kib, 0, 10*us, 15*us, 90*us, 3*ms),
						OpWrite:   op(3, 3*4*kib, 0, 40*us, 45*us, 1*ms),
						OpFlush:   op(2, 0, 0, 500*us, 700*us),
						OpDiscard: op(1, 1*mib, 0, 20*ms),
					}},
					{Name: "nvme1n1", State: MemberRebuilding, Ops: [NumOps]OpStats{
						OpWrite: op(2, 4*kib, 1, 60*us, 12*time.Second),
						OpFlush: op(1, 0, 0, 400*us),
					}},
				},
				Queues:    []QueueStats{{ID: 0, InFlight: 3}, {ID: 1, InFlight: 0}},
				UblkFlags: []string{"user_recovery", "user_recovery_reissue", "cmd_ioctl_encode", "no_auto_part_scan"},
			},
			{
				Device: "ublkb1", Name: "scratch", Level: "raid10", Layout: "n2",
				State:     ArrayActive,
				RaidDisks: 4,
				Size:      3 * gib,
				Synced:    123, // not syncing: ignored
				Members: []MemberStats{
					{Name: "sda", State: MemberActive},
					{Name: "sdb", State: MemberFailed, Ops: [NumOps]OpStats{
						OpRead: op(1, 0, 1, 30*time.Second),
					}},
					{Name: "sdc", State: MemberActive},
					{Name: "sdd", State: MemberSpare},
				},
				Queues: []QueueStats{{ID: 0, InFlight: 0}},
			},
			{
				Device: "ublkb2", Level: "raid5", Layout: "left-symmetric",
				State:     ArrayActive,
				RaidDisks: 3,
				Size:      2 * gib,
				Parity: &ParityStats{
					Writes:           [NumParityWrites]uint64{ParityRMW: 70, ParityRCW: 20, ParityFull: 9, ParityReconstruct: 2, ParityDataOnly: 1},
					ReconstructReads: 11, StripeWaits: 4, DirectReads: 6, BufferWaits: 3,
					LogEntries: 102, LogWaits: 6, LogCheckpoints: 8, Healed: 2, Unhealed: 1,
				},
				Members: []MemberStats{
					{Name: "vdc", State: MemberActive},
					{Name: "vdd", State: MemberActive},
					{Name: "vde", State: MemberActive},
				},
				Queues: []QueueStats{{ID: 0, InFlight: 1}},
			},
		}
	})
}

// scrape serves a registry holding only the Collector, as the daemon's
// endpoint does, and returns the text exposition.
func scrape(t *testing.T, src Source) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src))
	srv := httptest.NewServer(Handler(reg, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	return string(body)
}

func TestExpositionGolden(t *testing.T) {
	got := scrape(t, fakeSource())
	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./metrics -run Golden -update)", err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s (if intended: go test ./metrics -run Golden -update)\n%s",
			golden, lineDiff(string(want), got))
	}

	// The values that carry the md semantics, checked by hand so that an
	// -update cannot bless a wrong one.
	for _, line := range []string{
		`ublkraid_state{device="ublkb0",state="recovering"} 1`,
		`ublkraid_state{device="ublkb0",state="active"} 0`,
		`ublkraid_state{device="ublkb1",state="active"} 1`,
		`ublkraid_disks{device="ublkb0",state="active"} 1`,
		`ublkraid_disks{device="ublkb0",state="rebuilding"} 1`,
		`ublkraid_disks{device="ublkb1",state="failed"} 1`,
		`ublkraid_disks{device="ublkb1",state="spare"} 1`,
		`ublkraid_disks_required{device="ublkb1"} 4`,
		`ublkraid_degraded{device="ublkb0"} 1`,
		`ublkraid_degraded{device="ublkb1"} 2`, // one failed, one empty slot
		`ublkraid_blocks{device="ublkb0"} 1.048576e+06`,
		`ublkraid_blocks_synced{device="ublkb0"} 262144`,
		`ublkraid_blocks_synced{device="ublkb1"} 3.145728e+06`, // = blocks: no sync
		`ublkraid_sync_speed_bytes_per_second{device="ublkb0"} 1.048576e+08`,
		`ublkraid_info{device="ublkb1",layout="n2",level="raid10",name="scratch"} 1`,
		`ublkraid_bitmap_dirty_regions{device="ublkb0"} 3`,
		`ublkraid_bitmap_data_writes_waited_total{device="ublkb0"} 3`,
		`ublkraid_bitmap_wait_seconds_bucket{device="ublkb0",le="0.0002"} 2`,
		`ublkraid_bitmap_wait_seconds_count{device="ublkb0"} 3`,
		`ublkraid_member_state{device="ublkb1",member="sdb",state="failed"} 1`,
		`ublkraid_member_ops_total{device="ublkb0",member="nvme0n1",op="read"} 4`,
		`ublkraid_member_bytes_total{device="ublkb0",member="nvme0n1",op="read"} 16384`,
		`ublkraid_member_errors_total{device="ublkb0",member="nvme1n1",op="write"} 1`,
		`ublkraid_member_latency_seconds_bucket{device="ublkb0",member="nvme0n1",op="read",le="1e-05"} 1`,
		`ublkraid_member_latency_seconds_bucket{device="ublkb0",member="nvme0n1",op="read",le="0.0001"} 3`,
		`ublkraid_member_latency_seconds_bucket{device="ublkb0",member="nvme1n1",op="write",le="10"} 1`,
		`ublkraid_member_latency_seconds_bucket{device="ublkb0",member="nvme1n1",op="write",le="+Inf"} 2`,
		`ublkraid_member_latency_seconds_sum{device="ublkb0",member="nvme1n1",op="write"} 12.00006`,
		`ublkraid_queue_requests_in_flight{device="ublkb0",queue="0"} 3`,
		`# TYPE ublkraid_member_latency_seconds histogram`,
		`# TYPE ublkraid_bitmap_writes_total counter`,
		`# HELP ublkraid_blocks Size of the array in 1 KiB blocks (as node_md_blocks).`,
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("exposition lacks %q", line)
		}
	}
	for _, absent := range []string{
		`ublkraid_bitmap_regions{device="ublkb1"}`,                                 // no bitmap, no series
		`ublkraid_member_bytes_total{device="ublkb0",member="nvme0n1",op="flush"}`, // flushes move no bytes
	} {
		if strings.Contains(got, absent) {
			t.Errorf("exposition has %q", absent)
		}
	}
}

// lineDiff returns the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// familyNames returns the names of the families the fake source produces;
// TestDescribeCoversCollect checks that this is every family there is.
func familyNames(t *testing.T) map[string]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fakeSource()))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, mf := range mfs {
		names[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	return names
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

func TestDescribeCoversCollect(t *testing.T) {
	ch := make(chan *prometheus.Desc, 64)
	NewCollector(fakeSource()).Describe(ch)
	close(ch)
	var described []string
	for d := range ch {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read name of %s", d)
		}
		described = append(described, m[1])
	}
	slices.Sort(described)
	var gathered []string
	for n := range familyNames(t) {
		gathered = append(gathered, n)
	}
	slices.Sort(gathered)
	if !slices.Equal(described, gathered) {
		t.Fatalf("described %v\ngathered  %v", described, gathered)
	}
	for _, n := range described {
		if !strings.HasPrefix(n, Namespace+"_") {
			t.Errorf("%s lacks the %s_ prefix", n, Namespace)
		}
	}
}

func TestLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(fakeSource()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestNoArrays(t *testing.T) {
	got := scrape(t, SourceFunc(func() []ArrayStats { return nil }))
	if got != "" {
		t.Fatalf("no arrays, yet:\n%s", got)
	}
}

// TestBadLabelValue: a member name that is not UTF-8 costs its own series,
// not the scrape or the daemon.
func TestBadLabelValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(SourceFunc(func() []ArrayStats {
		return []ArrayStats{{Device: "ublkb0", Level: "raid1", RaidDisks: 2, Size: mib,
			Members: []MemberStats{{Name: "ok"}, {Name: "bad\xff"}}}}
	})))
	var logged bytes.Buffer
	srv := httptest.NewServer(Handler(reg, logger{&logged}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	for _, want := range []string{`ublkraid_degraded{device="ublkb0"} 0`, `member="ok"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(logged.String(), "UTF-8") {
		t.Errorf("error not logged: %q", logged.String())
	}
}

type logger struct{ w io.Writer }

func (l logger) Println(v ...any) {
	for _, x := range v {
		if e, ok := x.(error); ok {
			io.WriteString(l.w, e.Error())
		} else if s, ok := x.(string); ok {
			io.WriteString(l.w, s)
		}
	}
}

func TestNewRegistry(t *testing.T) {
	reg := NewRegistry(fakeSource())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, mf := range mfs {
		have = append(have, mf.GetName())
	}
	for _, want := range []string{"ublkraid_state", "go_goroutines", "process_open_fds"} {
		if !slices.Contains(have, want) {
			t.Errorf("registry lacks %s", want)
		}
	}
}

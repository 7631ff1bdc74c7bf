package engine

import (
	"bytes"
	"fmt"
	"math/bits"
	"testing"

	"pgregory.net/rapid"
)

// stripeSim is one stripe of a parity array in memory: each member's
// chunk, and which members can be read and written. It runs a plan as an
// executor would (refusing what the plan must not do) and says what the
// array's data then is.
type stripeSim struct {
	g        ParityGeometry
	m        StripeMap
	chunk    [][]byte // by member, ChunkSectors*512 bytes
	readable uint64
	writable uint64
	par      *Parity
}

const simSector = 512

func (s *stripeSim) rows(member int, lo, hi uint64) []byte {
	return s.chunk[member][lo*simSector : hi*simSector]
}

// slots returns the stripe's chunks of rows [lo, hi) in syndrome order,
// then P and Q, from get(member).
func (s *stripeSim) slots(get func(member int) []byte) [][]byte {
	out := make([][]byte, s.g.DataMembers()+s.par.Count())
	for mem := range s.g.Members {
		if sl := s.m.Slot[mem]; sl >= 0 {
			out[sl] = get(mem)
		}
	}
	out[s.g.DataMembers()] = get(s.m.P)
	if s.m.Q >= 0 {
		out[s.g.DataMembers()+1] = get(s.m.Q)
	}
	return out
}

// logical reconstructs the stripe's data chunks (array order) from what
// the readable members hold: the data a read of the array returns.
func (s *stripeSim) logical(t *rapid.T) [][]byte {
	n := s.g.ChunkSectors * simSector
	shards := s.slots(func(mem int) []byte {
		if s.readable&(1<<uint(mem)) == 0 {
			return nil
		}
		return append(make([]byte, 0, n), s.chunk[mem]...)
	})
	for i, b := range shards {
		if b == nil {
			shards[i] = make([]byte, 0, n)
		}
	}
	if err := s.par.Reconstruct(shards); err != nil {
		t.Fatalf("reconstruct: %v", err)
	}
	out := make([][]byte, s.g.DataMembers())
	for d := range out {
		out[d] = shards[s.m.Slot[s.m.Data[d]]]
	}
	return out
}

// consistent reports whether the readable parity chunks are the parity of
// the data (with unreadable data members at their reconstructed value).
func (s *stripeSim) consistent(t *rapid.T) bool {
	data := s.logical(t)
	inSlot := make([][]byte, len(data))
	for d, b := range data {
		inSlot[s.m.Slot[s.m.Data[d]]] = b
	}
	n := len(data[0])
	want := [][]byte{make([]byte, n), make([]byte, n)}[:s.par.Count()]
	if err := s.par.Compute(inSlot, want); err != nil {
		t.Fatal(err)
	}
	ok := s.readable&(1<<uint(s.m.P)) == 0 || bytes.Equal(want[0], s.chunk[s.m.P])
	if s.m.Q >= 0 && s.readable&(1<<uint(s.m.Q)) != 0 {
		ok = ok && bytes.Equal(want[1], s.chunk[s.m.Q])
	}
	return ok
}

// apply runs segment seg of a write whose new data for data member mem
// is newData(mem) (rows lo..hi of its chunk).
func (s *stripeSim) apply(t *rapid.T, seg StripeSegment, newData func(mem int) []byte) {
	if bad := seg.Reads &^ s.readable; bad != 0 {
		t.Fatalf("segment %+v reads unreadable members %b", seg, bad)
	}
	if bad := seg.Writes &^ s.writable; bad != 0 {
		t.Fatalf("segment %+v writes unwritable members %b", seg, bad)
	}
	n := int(seg.Hi-seg.Lo) * simSector
	old := map[int][]byte{}
	for mem := range s.g.Members {
		if seg.Reads&(1<<uint(mem)) != 0 {
			old[mem] = append([]byte(nil), s.rows(mem, seg.Lo, seg.Hi)...)
		}
	}
	written := func(mem int) bool { return seg.Written&(1<<uint(mem)) != 0 }
	newPar := [][]byte{make([]byte, n), make([]byte, n)}[:s.par.Count()]
	var cur [][]byte // RCW, Reconstruct: the data slots the new parity stands for
	switch seg.Mode {
	case ParityDataOnly:
		if seg.Reads != 0 {
			t.Fatalf("data-only segment reads %b", seg.Reads)
		}
	case ParityRMW:
		// Every present parity chunk: old parity + the change of each
		// written chunk.
		for i, pm := range []int{s.m.P, s.m.Q}[:s.par.Count()] {
			if seg.Writes&(1<<uint(pm)) == 0 {
				continue
			}
			b, ok := old[pm]
			if !ok {
				t.Fatalf("RMW segment %+v does not read parity member %d it writes", seg, pm)
			}
			copy(newPar[i], b)
		}
		for mem := range s.g.Members {
			if !written(mem) {
				continue
			}
			o, ok := old[mem]
			if !ok {
				t.Fatalf("RMW segment %+v does not read the old data of written member %d", seg, mem)
			}
			delta := append([]byte(nil), o...)
			for i, v := range newData(mem) {
				delta[i] ^= v
			}
			if err := s.par.Update(delta, int(s.m.Slot[mem]), newPar); err != nil {
				t.Fatal(err)
			}
		}
	case ParityRCW, ParityReconstruct:
		cur = s.slots(func(mem int) []byte {
			if written(mem) {
				return append([]byte(nil), newData(mem)...)
			}
			if b, ok := old[mem]; ok {
				return b
			}
			return nil
		})
		nd := s.g.DataMembers()
		missing := func(sl int) bool {
			for mem := range s.g.Members {
				if int(s.m.Slot[mem]) == sl {
					return seg.Missing&(1<<uint(mem)) != 0
				}
			}
			return false
		}
		switch seg.Mode {
		case ParityReconstruct:
			// Rebuild the Missing old data from the old chunks read.
			shards := s.slots(func(mem int) []byte {
				if b, ok := old[mem]; ok {
					return append([]byte(nil), b...)
				}
				return make([]byte, 0, n)
			})
			if err := s.par.Reconstruct(shards); err != nil {
				t.Fatalf("segment %+v: reconstruct: %v", seg, err)
			}
			for sl := range nd {
				if cur[sl] == nil && missing(sl) {
					cur[sl] = shards[sl]
				}
			}
		}
		for sl := range nd {
			if cur[sl] == nil {
				t.Fatalf("%v segment %+v: data slot %d neither written nor read", seg.Mode, seg, sl)
			}
		}
		if err := s.par.Compute(cur[:nd], newPar); err != nil {
			t.Fatal(err)
		}
	}
	for mem := range s.g.Members {
		if seg.Writes&(1<<uint(mem)) == 0 {
			continue
		}
		switch {
		case written(mem):
			copy(s.rows(mem, seg.Lo, seg.Hi), newData(mem))
		case mem == s.m.P:
			copy(s.rows(mem, seg.Lo, seg.Hi), newPar[0])
		case mem == s.m.Q:
			copy(s.rows(mem, seg.Lo, seg.Hi), newPar[1])
		case seg.Mode == ParityReconstruct && seg.Missing&(1<<uint(mem)) != 0:
			// A rebuilding member: the rows the new parity stands for.
			copy(s.rows(mem, seg.Lo, seg.Hi), cur[s.m.Slot[mem]])
		default:
			t.Fatalf("segment %+v writes member %d, neither written data nor parity", seg, mem)
		}
	}
}

// Any write within a stripe, planned and run, leaves the written data
// readable, the rest of the data as it was and the parity consistent,
// with up to ParityMembers members lost (faulty, missing, or rebuilding
// from any offset: readable in the stripe only once rebuilt past it), and
// the rows it writes on a rebuilding member right; with none lost, each
// segment reads what md's rule picks. Over untrusted parity (garbage, as
// in a never-written region) the rows the write covers come out
// consistent, never by RMW, with lost unwritten data as the old parity
// rebuilds it.
func TestPlanStripeWriteProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := ParityGeometry{Level: rapid.SampledFrom([]Level{Level5, Level6}).Draw(t, "level"),
			Layout:       ParityLayout(rapid.IntRange(0, 3).Draw(t, "layout")),
			ChunkSectors: uint64(rapid.SampledFrom([]int{8, 16}).Draw(t, "chunk"))}
		g.Members = rapid.IntRange(g.ParityMembers()+2, 8).Draw(t, "members")
		stripes := uint64(rapid.IntRange(1, 3).Draw(t, "stripes"))
		g.MemberSectors = stripes * g.ChunkSectors
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		stripe := uint64(rapid.IntRange(0, int(stripes)-1).Draw(t, "stripe"))
		par, err := NewParity(g.DataMembers(), g.Level == Level6)
		if err != nil {
			t.Fatal(err)
		}
		s := &stripeSim{g: g, m: g.Stripe(stripe), par: par, chunk: make([][]byte, g.Members)}
		seed := rapid.Uint64().Draw(t, "seed")
		fill := func(b []byte, salt uint64) {
			x := seed ^ salt*0x9e3779b97f4a7c15 | 1
			for i := range b {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				b[i] = byte(x)
			}
		}
		cb := g.ChunkSectors * simSector
		for mem := range s.chunk {
			s.chunk[mem] = make([]byte, cb)
		}
		for d := range g.DataMembers() {
			fill(s.chunk[s.m.Data[d]], uint64(d)+1)
		}
		all := uint64(1)<<uint(g.Members) - 1
		s.readable, s.writable = all, all
		trusted := rapid.Bool().Draw(t, "parity trusted")
		pc := s.slots(func(mem int) []byte { return s.chunk[mem] })
		if trusted {
			if err := par.Compute(pc[:g.DataMembers()], pc[g.DataMembers():]); err != nil {
				t.Fatal(err)
			}
		} else {
			for i, b := range pc[g.DataMembers():] {
				fill(b, 500+uint64(i)) // garbage parity
			}
		}
		before := make([][]byte, g.DataMembers())
		for d := range before {
			before[d] = append([]byte(nil), s.chunk[s.m.Data[d]]...)
		}
		// Lose up to ParityMembers members.
		st := &ArrayState{Members: make([]MemberStatus, g.Members)}
		lost := rapid.IntRange(0, g.ParityMembers()).Draw(t, "lost")
		for _, mem := range rapid.Permutation(seq(g.Members)).Draw(t, "order")[:lost] {
			switch rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("how %d", mem)) {
			case 0:
				st.Members[mem].State = MemberFaulty
			case 1:
				st.Members[mem].State = MemberMissing
			default:
				off := uint64(rapid.IntRange(0, int(g.MemberSectors)).Draw(t, fmt.Sprintf("rebuilt to %d", mem)))
				st.Members[mem] = MemberStatus{State: MemberRebuilding, RebuildOffset: off}
			}
		}
		for mem, ms := range st.Members {
			if !ms.readable((stripe + 1) * g.ChunkSectors) {
				s.readable &^= 1 << uint(mem)
				if ms.State == MemberRebuilding {
					fill(s.chunk[mem], 900+uint64(mem)) // not rebuilt here yet: stale
				}
			}
			if !ms.writable() {
				s.writable &^= 1 << uint(mem)
			}
		}
		// The write.
		span := g.ChunkSectors * uint64(g.DataMembers())
		off := uint64(rapid.IntRange(0, int(span)-1).Draw(t, "offset"))
		n := uint64(rapid.IntRange(1, int(span-off)).Draw(t, "sectors"))
		segs, err := g.PlanStripeWrite(st, stripe*span+off, uint32(n), trusted, nil)
		if err != nil {
			t.Fatal(err)
		}
		// What the data should become: the write over the old data; with
		// untrusted parity a lost member's unwritten data is what the old
		// parity rebuilds (garbage, as the chunk it stands for), which the
		// new parity must then stand for.
		pre := s.logical(t)
		want := make([][]byte, g.DataMembers())
		for d := range want {
			want[d] = append([]byte(nil), before[d]...)
			if !trusted && s.readable&(1<<uint(s.m.Data[d])) == 0 {
				want[d] = pre[d]
			}
		}
		newBytes := make([]byte, n*simSector)
		fill(newBytes, 1000+off)
		for i := range n {
			a := off + i
			d, row := a/g.ChunkSectors, a%g.ChunkSectors
			copy(want[d][row*simSector:], newBytes[i*simSector:(i+1)*simSector])
		}
		covered := make([]bool, n)
		for _, seg := range segs {
			newData := func(mem int) []byte {
				for d := range g.DataMembers() {
					if int(s.m.Data[d]) == mem {
						return want[d][seg.Lo*simSector : seg.Hi*simSector]
					}
				}
				t.Fatalf("member %d holds no data chunk", mem)
				return nil
			}
			for d := range uint64(g.DataMembers()) {
				if seg.Written&(1<<uint(s.m.Data[d])) == 0 {
					continue
				}
				for row := seg.Lo; row < seg.Hi; row++ {
					a := d*g.ChunkSectors + row
					if a < off || a >= off+n || covered[a-off] {
						t.Fatalf("segment %+v covers array sector %d of the stripe: outside the write or twice", seg, a)
					}
					covered[a-off] = true
				}
			}
			if lost == 0 {
				// md's rule: the cheaper of RMW and RCW, RCW on a tie,
				// and always RCW over untrusted parity.
				w := bits.OnesCount64(seg.Written)
				rmw, rcw := w+g.ParityMembers(), g.DataMembers()-w
				wantReads, wantMode := rcw, ParityRCW
				if rmw < rcw && trusted {
					wantReads, wantMode = rmw, ParityRMW
				}
				if seg.Mode != wantMode || bits.OnesCount64(seg.Reads) != wantReads {
					t.Fatalf("segment %+v: %v reading %d; md reads %d with %v", seg, seg.Mode, bits.OnesCount64(seg.Reads), wantReads, wantMode)
				}
			}
			if !trusted && seg.Mode == ParityRMW {
				t.Fatalf("segment %+v updates untrusted parity", seg)
			}
			if !trusted && seg.Mode == ParityReconstruct && seg.Missing == 0 {
				t.Fatalf("segment %+v reconstructs over untrusted parity with nothing lost", seg)
			}
			s.apply(t, seg, newData)
		}
		for i, c := range covered {
			if !c {
				t.Fatalf("array sector %d of the write is in no segment", off+uint64(i))
			}
		}
		// The rows each segment covered: every member the plan had to
		// write there (a rebuilding one included) holds its expected
		// contents, and the parity is that of the data.
		for _, seg := range segs {
			lo, hi := seg.Lo*simSector, seg.Hi*simSector
			data := make([][]byte, g.DataMembers())
			for d := range want {
				data[s.m.Slot[s.m.Data[d]]] = want[d][lo:hi]
			}
			wp := [][]byte{make([]byte, hi-lo), make([]byte, hi-lo)}[:par.Count()]
			if err := par.Compute(data, wp); err != nil {
				t.Fatal(err)
			}
			for mem := range g.Members {
				bit := uint64(1) << uint(mem)
				if s.writable&bit == 0 {
					continue
				}
				var exp []byte
				switch {
				case mem == s.m.P:
					exp = wp[0]
				case mem == s.m.Q:
					exp = wp[1]
				case seg.Written&bit != 0:
					exp = data[s.m.Slot[mem]]
				case s.readable&bit == 0 && seg.Mode != ParityReconstruct:
					// Rebuilding, not written: stays stale (the parity
					// stands for its rows, which the rebuild writes).
					// A Reconstruct writes its rebuilt rows: a rebuild
					// that passed the stripe over as never written (the
					// parity untrusted there) leaves them as they are.
					continue
				default:
					exp = data[s.m.Slot[mem]]
				}
				if !bytes.Equal(s.chunk[mem][lo:hi], exp) {
					t.Fatalf("segment %+v: member %d (readable %v) holds the wrong rows after the write (segments %+v)", seg, mem, s.readable&bit != 0, segs)
				}
			}
		}
		if trusted {
			// All of the stripe: the data as expected (rebuilt where
			// lost), the parity consistent.
			got := s.logical(t)
			for d := range want {
				if !bytes.Equal(got[d], want[d]) {
					t.Fatalf("data chunk %d differs after the write (segments %+v)", d, segs)
				}
			}
			if !s.consistent(t) {
				t.Fatalf("parity inconsistent after the write (segments %+v)", segs)
			}
		}
	})
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// A stripe with more members lost than its parity covers cannot be
// written nor read; a write or read across two stripes is refused.
func TestPlanStripeWriteRefusals(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	st := &ArrayState{Members: make([]MemberStatus, 4)}
	st.Members[0].State, st.Members[2].State = MemberFaulty, MemberMissing
	if _, err := g.PlanStripeWrite(st, 0, 8, true, nil); err == nil {
		t.Fatal("raid5 with two members lost: a write was planned")
	}
	if _, err := g.PlanStripeRead(st, 0, 24, nil); err == nil {
		t.Fatal("raid5 with two members lost: a read of the whole stripe was planned")
	}
	st.Members[2].State = MemberActive
	if _, err := g.PlanStripeWrite(st, 20, 8, true, nil); err == nil {
		t.Fatal("a write across stripes 0 and 1 was planned")
	}
	if _, err := g.PlanStripeRead(st, 20, 8, nil); err == nil {
		t.Fatal("a read across stripes 0 and 1 was planned")
	}
	if _, err := g.PlanStripeWrite(st, g.ArraySectors()-4, 8, true, nil); err == nil {
		t.Fatal("a write past the array's end was planned")
	}
}

func BenchmarkPlanStripeWrite(b *testing.B) {
	g := ParityGeometry{Level: Level6, Members: 8, Layout: LeftSymmetric, ChunkSectors: 128, MemberSectors: 1 << 20}
	st := &ArrayState{Members: make([]MemberStatus, 8)}
	segs := make([]StripeSegment, 0, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var err error
		if segs, err = g.PlanStripeWrite(st, uint64(i%1000)*768+16, 8, true, segs[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// Any read within a stripe, planned and run (rebuilding lost chunks from
// the others and the parity), returns the array's data, with up to
// ParityMembers members lost (faulty, missing, or rebuilding from any
// offset: their chunks zeroed where unreadable, so nothing of them can be
// used); with none lost it reads exactly the chunks asked for.
func TestPlanStripeReadProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := ParityGeometry{Level: rapid.SampledFrom([]Level{Level5, Level6}).Draw(t, "level"),
			Layout: ParityLayout(rapid.IntRange(0, 3).Draw(t, "layout")), ChunkSectors: 8}
		g.Members = rapid.IntRange(g.ParityMembers()+2, 8).Draw(t, "members")
		g.MemberSectors = 2 * g.ChunkSectors
		stripe := uint64(rapid.IntRange(0, 1).Draw(t, "stripe"))
		par, err := NewParity(g.DataMembers(), g.Level == Level6)
		if err != nil {
			t.Fatal(err)
		}
		s := &stripeSim{g: g, m: g.Stripe(stripe), par: par, chunk: make([][]byte, g.Members)}
		x := rapid.Uint64().Draw(t, "seed") | 1
		for mem := range s.chunk {
			s.chunk[mem] = make([]byte, g.ChunkSectors*simSector)
			for i := range s.chunk[mem] {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				s.chunk[mem][i] = byte(x)
			}
		}
		all := uint64(1)<<uint(g.Members) - 1
		s.readable, s.writable = all, all
		pc := s.slots(func(mem int) []byte { return s.chunk[mem] })
		if err := par.Compute(pc[:g.DataMembers()], pc[g.DataMembers():]); err != nil {
			t.Fatal(err)
		}
		want := s.logical(t)
		st := &ArrayState{Members: make([]MemberStatus, g.Members)}
		lost := rapid.IntRange(0, g.ParityMembers()).Draw(t, "lost")
		for _, mem := range rapid.Permutation(seq(g.Members)).Draw(t, "order")[:lost] {
			switch rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("how %d", mem)) {
			case 0:
				st.Members[mem].State = MemberFaulty
			case 1:
				st.Members[mem].State = MemberMissing
			default:
				off := uint64(rapid.IntRange(0, int(g.MemberSectors)).Draw(t, fmt.Sprintf("rebuilt to %d", mem)))
				st.Members[mem] = MemberStatus{State: MemberRebuilding, RebuildOffset: off}
			}
			if !st.Members[mem].readable((stripe + 1) * g.ChunkSectors) {
				s.readable &^= 1 << uint(mem)
				clear(s.chunk[mem]) // gone or stale: nothing of it may be used
			}
		}
		span := g.ChunkSectors * uint64(g.DataMembers())
		off := uint64(rapid.IntRange(0, int(span)-1).Draw(t, "offset"))
		n := uint64(rapid.IntRange(1, int(span-off)).Draw(t, "sectors"))
		segs, err := g.PlanStripeRead(st, stripe*span+off, uint32(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n*simSector)
		filled := make([]bool, n)
		for _, seg := range segs {
			if bad := seg.Reads &^ s.readable; bad != 0 {
				t.Fatalf("segment %+v reads unreadable members %b", seg, bad)
			}
			if lost == 0 && seg.Reads != seg.Wanted {
				t.Fatalf("segment %+v reads more than it wants with every member readable", seg)
			}
			var shards [][]byte
			if seg.Missing != 0 {
				shards = s.slots(func(mem int) []byte {
					if seg.Reads&(1<<uint(mem)) != 0 {
						return append([]byte(nil), s.rows(mem, seg.Lo, seg.Hi)...)
					}
					return make([]byte, 0, (seg.Hi-seg.Lo)*simSector)
				})
				if err := par.Reconstruct(shards); err != nil {
					t.Fatalf("segment %+v: %v", seg, err)
				}
			}
			for d := range uint64(g.DataMembers()) {
				mem := int(s.m.Data[d])
				if seg.Wanted&(1<<uint(mem)) == 0 {
					continue
				}
				src := s.rows(mem, seg.Lo, seg.Hi)
				if seg.Missing&(1<<uint(mem)) != 0 {
					src = shards[s.m.Slot[mem]]
				} else if seg.Reads&(1<<uint(mem)) == 0 {
					t.Fatalf("segment %+v wants member %d, neither read nor rebuilt", seg, mem)
				}
				for row := seg.Lo; row < seg.Hi; row++ {
					a := d*g.ChunkSectors + row - off
					if a >= n || filled[a] {
						t.Fatalf("segment %+v: row %d of data chunk %d outside the read or twice", seg, row, d)
					}
					filled[a] = true
					copy(got[a*simSector:], src[(row-seg.Lo)*simSector:(row-seg.Lo+1)*simSector])
				}
			}
		}
		for i := range n {
			a := off + i
			d, row := a/g.ChunkSectors, a%g.ChunkSectors
			if !filled[i] || !bytes.Equal(got[i*simSector:(i+1)*simSector], want[d][row*simSector:(row+1)*simSector]) {
				t.Fatalf("array sector %d of the stripe: wrong data or none (segments %+v)", a, segs)
			}
		}
	})
}

func BenchmarkPlanStripeRead(b *testing.B) {
	g := ParityGeometry{Level: Level6, Members: 8, Layout: LeftSymmetric, ChunkSectors: 128, MemberSectors: 1 << 20}
	st := &ArrayState{Members: make([]MemberStatus, 8)}
	st.Members[3].State = MemberFaulty
	segs := make([]StripeReadSegment, 0, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var err error
		if segs, err = g.PlanStripeRead(st, uint64(i%1000)*768+16, 256, segs[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParityArrayFailRedundant: a parity array's member is failed only
// while no stripe would lose more members than its parity covers; a
// rebuilding member counts as lost (it is, above its rebuild offset).
func TestParityArrayFailRedundant(t *testing.T) {
	for _, c := range []struct {
		level   Level
		members int
	}{{Level5, 4}, {Level6, 5}} {
		g := ParityGeometry{Level: c.level, Members: c.members, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
		arr, err := NewParityArray(g)
		if err != nil {
			t.Fatal(err)
		}
		if c.level == Level6 {
			arr.Update(func(ms []MemberStatus) { ms[4] = MemberStatus{State: MemberRebuilding, RebuildOffset: 8} })
		}
		if _, changed, out := arr.FailRedundant(0); !changed || !out {
			t.Fatalf("%v: first failure refused", c.level)
		}
		if _, changed, out := arr.FailRedundant(1); changed || out {
			t.Fatalf("%v: failure past the parity accepted", c.level)
		}
		if c.level == Level6 {
			if _, changed, out := arr.FailRedundant(4); !changed || !out {
				t.Fatalf("%v: a rebuilding member not failed", c.level)
			}
		}
	}
	if _, err := NewParityArray(ParityGeometry{Level: Level5, Members: 2, ChunkSectors: 8, MemberSectors: 64}); err == nil {
		t.Fatal("raid5 of 2 members accepted")
	}
}

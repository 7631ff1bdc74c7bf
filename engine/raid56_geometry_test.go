package engine

import (
	"fmt"
	"strings"
	"testing"
)

// stripeRows draws the first n stripes as md's documentation does: one
// row per stripe, "D<chunk>", "P" or "Q" per member.
func stripeRows(g ParityGeometry, n int) string {
	var rows []string
	nd := g.DataMembers()
	for s := range n {
		m := g.Stripe(uint64(s))
		cells := make([]string, g.Members)
		cells[m.P] = "P"
		if m.Q >= 0 {
			cells[m.Q] = "Q"
		}
		for d := range nd {
			cells[m.Data[d]] = fmt.Sprintf("D%d", s*nd+d)
		}
		rows = append(rows, strings.Join(cells, " "))
	}
	return strings.Join(rows, " / ")
}

func TestParityLayoutsOfFourMembers(t *testing.T) {
	for _, c := range []struct {
		level  Level
		layout ParityLayout
		want   string
	}{
		{Level5, LeftSymmetric, "D0 D1 D2 P / D4 D5 P D3 / D8 P D6 D7 / P D9 D10 D11"},
		{Level5, LeftAsymmetric, "D0 D1 D2 P / D3 D4 P D5 / D6 P D7 D8 / P D9 D10 D11"},
		{Level5, RightSymmetric, "P D0 D1 D2 / D5 P D3 D4 / D7 D8 P D6 / D9 D10 D11 P"},
		{Level5, RightAsymmetric, "P D0 D1 D2 / D3 P D4 D5 / D6 D7 P D8 / D9 D10 D11 P"},
		{Level6, LeftSymmetric, "Q D0 D1 P / D2 D3 P Q / D5 P Q D4 / P Q D6 D7"},
		{Level6, LeftAsymmetric, "Q D0 D1 P / D2 D3 P Q / D4 P Q D5 / P Q D6 D7"},
		{Level6, RightSymmetric, "P Q D0 D1 / D3 P Q D2 / D4 D5 P Q / Q D6 D7 P"},
		{Level6, RightAsymmetric, "P Q D0 D1 / D2 P Q D3 / D4 D5 P Q / Q D6 D7 P"},
	} {
		g := ParityGeometry{Level: c.level, Members: 4, Layout: c.layout, ChunkSectors: 128, MemberSectors: 1 << 20}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := stripeRows(g, 4); got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.level, c.layout, got, c.want)
		}
	}
}

// Every stripe of every layout places each member once, data in syndrome
// slots 0..nd-1, and LocateData agrees with Stripe.
func TestParityStripesArePermutations(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		for layout := LeftAsymmetric; layout <= RightSymmetric; layout++ {
			for n := 3 + int(level-Level5); n <= 9; n++ {
				g := ParityGeometry{Level: level, Members: n, Layout: layout, ChunkSectors: 16, MemberSectors: 16 * 40}
				if err := g.Validate(); err != nil {
					t.Fatal(err)
				}
				nd := g.DataMembers()
				for s := range uint64(2 * n) {
					m := g.Stripe(s)
					seen := make([]bool, n)
					slots := make([]bool, nd)
					mark := func(mem int) {
						if mem < 0 || mem >= n || seen[mem] {
							t.Fatalf("%s %s x%d stripe %d: member %d twice or out of range: %+v", level, layout, n, s, mem, m)
						}
						seen[mem] = true
					}
					mark(m.P)
					if level == Level6 {
						mark(m.Q)
					} else if m.Q != -1 {
						t.Fatalf("raid5 stripe with Q %d", m.Q)
					}
					for d := range nd {
						mem := int(m.Data[d])
						mark(mem)
						sl := m.Slot[mem]
						if sl < 0 || int(sl) >= nd || slots[sl] {
							t.Fatalf("%s %s x%d stripe %d: slot %d of member %d", level, layout, n, s, sl, mem)
						}
						slots[sl] = true
						st, di, mm, ms := g.LocateData((s*uint64(nd)+uint64(d))*16 + 5)
						if st != s || di != d || mm != mem || ms != s*16+5 {
							t.Fatalf("LocateData: stripe %d idx %d member %d sector %d, want %d %d %d %d", st, di, mm, ms, s, d, mem, s*16+5)
						}
					}
					if m.Slot[m.P] != -1 || level == Level6 && m.Slot[m.Q] != -1 {
						t.Fatalf("parity members have syndrome slots: %+v", m)
					}
					// Symmetric layouts keep array order in the syndrome.
					if layout == LeftSymmetric || layout == RightSymmetric {
						for d := range nd {
							if int(m.Slot[m.Data[d]]) != d {
								t.Fatalf("%s %s: data %d in slot %d", level, layout, d, m.Slot[m.Data[d]])
							}
						}
					}
				}
			}
		}
	}
}

func TestParityGeometryValidate(t *testing.T) {
	ok := ParityGeometry{Level: Level5, Members: 3, Layout: LeftSymmetric, ChunkSectors: 128, MemberSectors: 1024}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := ok.ArraySectors(); got != 8*128*2 {
		t.Errorf("ArraySectors = %d", got)
	}
	for _, c := range []struct {
		change func(*ParityGeometry)
		want   string
	}{
		{func(g *ParityGeometry) { g.Members = 2 }, "raid5 needs 3"},
		{func(g *ParityGeometry) { g.Level, g.Members = Level6, 3 }, "raid6 needs 4"},
		{func(g *ParityGeometry) { g.Level = Level1 }, "not a parity level"},
		{func(g *ParityGeometry) { g.Layout = 4 }, "unsupported layout"},
		{func(g *ParityGeometry) { g.ChunkSectors = 96 }, "not a power of two"},
		{func(g *ParityGeometry) { g.ChunkSectors = 4 }, "below the minimum"},
		{func(g *ParityGeometry) { g.MemberSectors = 64 }, "too small"},
	} {
		g := ok
		c.change(&g)
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", g, err, c.want)
		}
	}
	for _, s := range []string{"left-symmetric", "ls", "ra", "right-asymmetric", "la", "rs"} {
		l, err := ParseParityLayout(s)
		if err != nil || (len(s) > 2 && l.String() != s) {
			t.Errorf("ParseParityLayout(%q) = %v, %v", s, l, err)
		}
	}
	if _, err := ParseParityLayout("n2"); err == nil {
		t.Error("ParseParityLayout(n2) accepted")
	}
}

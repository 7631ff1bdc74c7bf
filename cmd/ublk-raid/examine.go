package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

type examineOptions struct {
	output string
	member string
}

func newExamineCmd() *cobra.Command {
	return newInspectCmd("examine MEMBER", "Print the ublk-raid superblock of a member (like mdadm --examine)", runExamine)
}

// newInspectCmd makes a command that prints something read from one
// member, as text or JSON (-o).
func newInspectCmd(use, short string, run func(examineOptions, io.Writer) error) *cobra.Command {
	var o examineOptions
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.member = args[0]; o.member == "" {
				return usagef("MEMBER is empty")
			}
			if o.output != "text" && o.output != "json" {
				return usagef("-o %q: want text or json", o.output)
			}
			return run(o, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return c
}

// examineJSON is the stable -o json schema of examine.
type examineJSON struct {
	Member       string  `json:"member"`
	ArrayUUID    string  `json:"array_uuid"`
	Name         string  `json:"name"`
	Level        string  `json:"level"`
	Layout       string  `json:"layout,omitempty"`
	ChunkBytes   uint64  `json:"chunk_bytes"`
	RaidDevices  uint32  `json:"raid_devices"`
	Role         *uint32 `json:"role"` // null for a spare
	MemberUUID   string  `json:"member_uuid"`
	DataOffset   uint64  `json:"data_offset_bytes"`
	DataBytes    uint64  `json:"data_bytes"`
	BitmapOffset uint64  `json:"bitmap_offset_bytes"`
	BitmapBytes  uint64  `json:"bitmap_bytes"`
	// The raid5/6 write-hole log area (absent for other levels).
	LogOffset uint64 `json:"write_hole_log_offset_bytes,omitempty"`
	LogBytes  uint64 `json:"write_hole_log_bytes,omitempty"`
	Events    uint64 `json:"events"`
	Clean     bool   `json:"clean"`
	// ResyncOffset (not clean only, as md's resync_offset): the array
	// sector a resync stopped part-way resumes from; absent (0) after a
	// crash, when the resync starts from the beginning.
	ResyncOffset uint64     `json:"resync_offset_sectors,omitempty"`
	Created      time.Time  `json:"created"`
	Updated      time.Time  `json:"updated"`
	Roles        []roleJSON `json:"roles"`
	// FromShadow: the primary superblock was torn by an interrupted update
	// and this is its shadow copy, which holds that update (the next
	// update rewrites both).
	FromShadow bool `json:"from_shadow_copy"`
}

type roleJSON struct {
	Role           uint32 `json:"role"`
	State          string `json:"state"`
	MemberUUID     string `json:"member_uuid"`
	RecoveryOffset uint64 `json:"recovery_offset_sectors,omitempty"`
}

// openExamined opens member read-only (without claiming it) and reads its
// superblock. The caller closes the member.
func openExamined(member string) (*ublk.Member, *engine.Superblock, error) {
	m, sb, _, err := openExaminedCopy(member)
	return m, sb, err
}

// openExaminedCopy is openExamined, also saying whether the superblock was
// read from its shadow copy (the primary torn by an interrupted update).
func openExaminedCopy(member string) (*ublk.Member, *engine.Superblock, bool, error) {
	m, err := ublk.OpenMemberReadOnly(member)
	if err != nil {
		return nil, nil, false, err
	}
	sb, shadow, err := engine.ReadSuperblock(m.ReadBlock, m.Size)
	if err == nil {
		// Bounded against the device it came from, as assembly does.
		err = sb.CheckMemberSize(uint64(m.Size))
	}
	if err != nil {
		m.Close()
		return nil, nil, false, fmt.Errorf("%s: %w", member, err)
	}
	return m, sb, shadow, nil
}

func runExamine(o examineOptions, stdout io.Writer) error {
	m, sb, shadow, err := openExaminedCopy(o.member)
	if err != nil {
		return err
	}
	defer m.Close()
	j := examineJSON{
		FromShadow: shadow,
		Member:     o.member, ArrayUUID: engine.UUIDString(sb.ArrayUUID), Name: sb.Name,
		Level: engine.Level(sb.Level).String(), ChunkBytes: uint64(sb.ChunkSectors) << 9, RaidDevices: sb.Members,
		MemberUUID: engine.UUIDString(sb.MemberUUID), DataOffset: sb.DataOffset, DataBytes: sb.DataSectors << 9,
		BitmapOffset: sb.BitmapOffset, BitmapBytes: sb.BitmapBytes, LogOffset: sb.LogOffset, LogBytes: sb.LogBytes,
		Events: sb.Events, Clean: sb.Clean, ResyncOffset: sb.ResyncOffset,
		Created: time.Unix(0, sb.CreateTime).UTC(), Updated: time.Unix(0, sb.UpdateTime).UTC(),
	}
	if sb.Level == uint32(engine.Level10) {
		if l, err := engine.LayoutFromMD(sb.Layout); err == nil {
			j.Layout = l.String()
		}
	}
	if engine.IsParityLevel(engine.Level(sb.Level)) {
		j.Layout = engine.ParityLayout(sb.Layout).String() // bounded to md's 0..3 by ParseSuperblock
	}
	if !sb.IsSpare() {
		r := sb.Role
		j.Role = &r
	}
	for i := range sb.Members {
		e := sb.Roles[i]
		j.Roles = append(j.Roles, roleJSON{Role: i, State: e.State.String(), MemberUUID: engine.UUIDString(e.Member), RecoveryOffset: e.RecoveryOffset})
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', 0)
	role := "spare (its superblock, events and state included, is as of when it was added: a spare's is not rewritten at each update)"
	if j.Role != nil {
		role = fmt.Sprint(*j.Role)
	}
	state := "active (not cleanly stopped)"
	resyncOffset := ""
	switch {
	case j.Clean:
		state = "clean"
	case j.ResyncOffset > 0:
		// A clean stop part-way through a resync (a crash records 0).
		state = "clean, resync pending"
		resyncOffset = fmt.Sprintf("%d sectors", j.ResyncOffset)
	}
	chunk := fmt.Sprintf("%dK", j.ChunkBytes>>10)
	if sb.Level == uint32(engine.Level1) {
		chunk = "" // (a mirror has no chunks: as mdadm, no row)
	}
	bitmap := ""
	if j.BitmapBytes != 0 {
		bitmap = fmt.Sprintf("%d sectors at sector %d", j.BitmapBytes>>9, j.BitmapOffset>>9)
	}
	for _, kv := range [][2]string{
		{"Member", j.Member}, {"Array UUID", j.ArrayUUID}, {"Name", j.Name}, {"Raid Level", j.Level},
		{"Layout", j.Layout}, {"Chunk Size", chunk},
		{"Raid Devices", fmt.Sprint(j.RaidDevices)}, {"Device Role", role}, {"Device UUID", j.MemberUUID},
		{"Data Offset", fmt.Sprintf("%d sectors", j.DataOffset>>9)}, {"Data Size", fmt.Sprintf("%d sectors", j.DataBytes>>9)},
		{"Internal Bitmap", bitmap}, {"Write-Hole Log", logArea(j.LogOffset, j.LogBytes)},
		{"Events", fmt.Sprint(j.Events)}, {"State", state}, {"Resync Offset", resyncOffset},
		{"Creation Time", j.Created.Format(time.RFC3339)}, {"Update Time", j.Updated.Format(time.RFC3339)},
		{"Superblock", shadowNote(shadow)},
	} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s\t: %s\n", kv[0], kv[1])
		}
	}
	for _, r := range j.Roles {
		fmt.Fprintf(tw, "Role %d\t: %s %s\n", r.Role, r.State, r.MemberUUID)
	}
	return tw.Flush()
}

// shadowNote says, for examine's text, that the superblock shown is the
// shadow copy ("" for the primary).
func shadowNote(shadow bool) string {
	if !shadow {
		return ""
	}
	return "read from the shadow copy: the primary was torn by an interrupted update"
}

// logArea describes a write-hole log area for examine's text ("" if none).
func logArea(off, n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d sectors at sector %d", n>>9, off>>9)
}

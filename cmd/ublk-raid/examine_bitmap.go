package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

func newExamineBitmapCmd() *cobra.Command {
	return newInspectCmd("examine-bitmap MEMBER", "Print a member's copy of the write-intent bitmap (like mdadm -X)", runExamineBitmap)
}

// examineBitmapJSON is the stable -o json schema of examine-bitmap.
// events_cleared is the generation in which a region was last cleared
// (md's events_cleared): a member whose superblock events are older is
// re-added with every written region copied, not only the dirty ones; a
// version 1 bitmap does not record it and is taken as cleared at its
// events.
type examineBitmapJSON struct {
	Member    string `json:"member"`
	ArrayUUID string `json:"array_uuid"`
	Version   int    `json:"version"`
	Events    uint64 `json:"events"`
	Cleared   uint64 `json:"events_cleared"`
	SBEvents  uint64 `json:"superblock_events"`
	Stale     bool   `json:"stale"` // older than the superblock: not trusted at assembly
	// Corrupt: why assembly does not use the copy at all, as far as this
	// member tells (its header more than one update ahead of the
	// superblock, another array's, of another array size than this
	// member's superblock gives, in blocks smaller than the member's).
	// Assembly takes the smallest data size among the members: after a
	// grow torn between them it may discard a copy this one calls good,
	// as mdadm -X, reading one device, cannot tell either.
	Corrupt      string   `json:"corrupt,omitempty"`
	RegionBytes  uint64   `json:"region_bytes"`
	BlockBytes   int      `json:"block_bytes"`
	ArrayBytes   uint64   `json:"array_bytes"`
	Regions      int      `json:"regions"`
	Dirty        int      `json:"dirty_regions"`
	Clean        int      `json:"clean_regions"`
	NeverWritten int      `json:"never_written_regions"`
	BadBlocks    []string `json:"bad_blocks,omitempty"`
}

func runExamineBitmap(o examineOptions, stdout io.Writer) error {
	m, sb, err := openExamined(o.member)
	if err != nil {
		return err
	}
	defer m.Close()
	if sb.BitmapBytes == 0 {
		return fmt.Errorf("%s: the array has no write-intent bitmap", o.member)
	}
	// As assembly: the superblock is bounded by the device before its
	// area is read, and no copy spans more than MaxCopyBytes of it.
	if err := sb.CheckMemberSize(uint64(m.Size)); err != nil {
		return fmt.Errorf("%s: %w", o.member, err)
	}
	area, err := m.ReadBlock(int64(sb.BitmapOffset), int(min(sb.BitmapBytes, bitmap.MaxCopyBytes)))
	if err != nil {
		return err
	}
	s, err := bitmap.Examine(area, sb.BitmapOffset)
	if err != nil {
		return fmt.Errorf("%s: bitmap: %w", o.member, err)
	}
	j := examineBitmapJSON{Member: o.member, ArrayUUID: engine.UUIDString(s.Header.ArrayUUID), Version: s.Header.Version,
		Events: s.Header.Events, Cleared: s.Header.EventsCleared,
		SBEvents: sb.Events, Stale: s.Header.Events < sb.Events, RegionBytes: s.Header.RegionSectors << 9,
		BlockBytes: s.Header.BlockSize, ArrayBytes: s.Header.ArraySectors << 9, Regions: s.Header.Regions,
		Dirty: s.Dirty, Clean: s.Clean, NeverWritten: s.NeverWritten}
	arraySectors, aerr := array.ArraySectorsOf(sb)
	switch {
	case s.Header.ArrayUUID != sb.ArrayUUID:
		j.Corrupt = "another array's bitmap"
	case s.Header.Events > sb.Events+1:
		// As bitmap.Load: a header is at most one update ahead.
		j.Corrupt = "header more than one update ahead of the superblock"
	case aerr == nil && s.Header.ArraySectors != arraySectors:
		// As bitmap.Load (checkHeader): a bitmap of another size.
		j.Corrupt = fmt.Sprintf("the bitmap covers %d sectors, the array has %d", s.Header.ArraySectors, arraySectors)
	case s.Header.BlockSize < m.LogicalBlock:
		j.Corrupt = fmt.Sprintf("the bitmap is written in %d-byte blocks, the member needs %d-byte blocks", s.Header.BlockSize, m.LogicalBlock)
	}
	for _, be := range s.BadBlocks {
		j.BadBlocks = append(j.BadBlocks, fmt.Sprintf("block %d: %v", be.Block, be.Err))
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', 0)
	stale := ""
	if j.Stale {
		stale = " (stale: older than the superblock, not trusted)"
	}
	if j.Corrupt != "" {
		stale = " (corrupt: " + j.Corrupt + ": not used)"
	}
	fmt.Fprintf(tw, "Member\t: %s\n", j.Member)
	fmt.Fprintf(tw, "Array UUID\t: %s\n", j.ArrayUUID)
	fmt.Fprintf(tw, "Version\t: %d\n", j.Version)
	fmt.Fprintf(tw, "Events\t: %d (superblock %d)%s\n", j.Events, j.SBEvents, stale)
	cleared := ""
	if j.Version < bitmap.Version {
		cleared = " (not recorded in this version: taken as its events)"
	}
	fmt.Fprintf(tw, "Events Cleared\t: %d%s\n", j.Cleared, cleared)
	fmt.Fprintf(tw, "Region Size\t: %dK\n", j.RegionBytes>>10)
	fmt.Fprintf(tw, "Block Size\t: %d\n", j.BlockBytes)
	fmt.Fprintf(tw, "Array Size\t: %dK\n", j.ArrayBytes>>10)
	fmt.Fprintf(tw, "Bitmap\t: %d regions, %d dirty (%.1f%%), %d clean, %d never written\n",
		j.Regions, j.Dirty, 100*float64(j.Dirty)/float64(max(1, j.Regions)), j.Clean, j.NeverWritten)
	for _, b := range j.BadBlocks {
		fmt.Fprintf(tw, "Bad Block\t: %s\n", b)
	}
	return tw.Flush()
}

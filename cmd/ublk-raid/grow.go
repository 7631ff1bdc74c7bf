package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ublk-raid/ublk-raid/daemon"
)

// newGrowCmd is `grow -n N --size max|SIZE`: like mdadm --grow --size,
// SIZE is what each member gives the array (the array's size for raid1).
func newGrowCmd(socket *string) *cobra.Command {
	var number int
	var size string
	c := &cobra.Command{
		Use:   "grow -n N --size max|SIZE",
		Short: "Grow an array into larger members (like mdadm --grow --size); with a bitmap the new space needs no sync",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if number < 0 {
				return usagef("grow needs -n N, the array")
			}
			if err := checkNumber(number); err != nil {
				return err
			}
			var req daemon.GrowRequest
			switch s := strings.TrimSpace(size); {
			case s == "":
				return usagef("grow needs --size max or --size SIZE (each member's data area, e.g. 2G)")
			case s == "max":
			default:
				v, err := parseSize(s)
				if err != nil {
					return usagef("--size: %v", err)
				}
				if v < 4096 {
					return usagef("--size %s: at least 4K", size)
				}
				req.SizeBytes = uint64(v)
			}
			a, err := daemon.NewClient(*socket).Grow(number, req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is %d bytes (%s)\n", a.Device, a.SizeBytes, humanSize(a.SizeBytes))
			printWarnings(cmd.ErrOrStderr(), a.Warnings)
			return nil
		},
	}
	c.Flags().IntVarP(&number, "number", "n", -1, "array (device) number")
	c.Flags().StringVar(&size, "size", "", "each member's data area: max (the most every member allows) or a size (4096, 512K, 2G, 4T)")
	return c
}

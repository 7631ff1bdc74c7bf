package array

import "github.com/ublk-raid/ublk-raid/array/memdev"

var _ Device = (*memdev.Dev)(nil)

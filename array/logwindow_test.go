package array

// Every recovery in this package's tests reads the write-hole log in
// windows of twice the geometry's largest entry, not 8 MiB: the logs of
// the tests' small arrays then span many windows (entries crossing a
// window's end are read again from their start).
func init() { parityLogScanWindow = 0 }

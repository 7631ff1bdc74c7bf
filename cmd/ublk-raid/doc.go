// Command ublk-raid serves block devices from user space on Linux's ublk
// driver. Each cobra command is an options struct and a RunE that calls a
// plain function, so argument handling is testable without a kernel. Bad
// input exits 2, other errors 1, in one line on stderr.
//
// Until the RAID engine and the daemon land, the serving commands
// (passthrough, recover) run in the foreground: they print the device path
// once it is live and serve it until it is deleted or they are signalled.
package main

// Command ublk-raid serves block devices from user space on Linux's ublk
// driver. Each cobra command is an options struct and a RunE that calls a
// plain function, so argument handling is testable without a kernel. Bad
// input exits 2 before anything is touched, other errors 1, in one line on
// stderr (detail --test: 1 degraded, 2 failed, 4 unknown).
//
// `serve` is the daemon (package daemon) that hosts every array; add, del,
// list, detail, fail, remove, re-add, replace, check, repair and grow are its
// clients over the control socket. del and list also handle ublk devices
// the daemon does not serve: run, passthrough and recover serve one device
// in the foreground, printing its path once it is live and serving it
// until it is deleted or they are signalled.
package main

#!/bin/sh
# Guest helper for crash tests: take the VM down like a power cut.
# Use with `scripts/vm/run.sh --expect-crash ...`.
#
# Prints @@UBLK_RAID_VM_CRASH@@ on the console (so run.sh can tell an intended
# crash from a VM that vanished), then resets the machine with sysrq 'b':
# no sync, no unmount, no device shutdown/cache flush in the guest. qemu runs
# with -no-reboot, so the reset ends qemu. Data the guest had already written
# to its disks (qemu uses O_DIRECT) stays in the disk files; whatever was only
# in guest memory (page cache, md/ublk server buffers, ...) is lost.
set -eu
if [ "${UBLK_RAID_VM:-}" != 1 ]; then
	echo "crash.sh: refusing to run outside the test VM (UBLK_RAID_VM != 1)" >&2
	exit 2
fi
# The marker goes through printk and the console, and is on the wire before
# the reset: neither path is synchronous on every kernel (7.3's serial console
# prints from a kthread, and a console write sits in the tty buffer until the
# UART takes it). A CI run lost its tail ("@@UBLK_RAID_VM_C"): run.sh took the
# intended crash for a vanished VM. So the console write is drained (tcdrain)
# before sysrq 'b'; the cut stays at a random moment of the writes, which go
# on meanwhile.
echo "<2>@@UBLK_RAID_VM_CRASH@@" >/dev/kmsg
python3 -c '
import os, termios
fd = os.open("/dev/console", os.O_WRONLY | os.O_NOCTTY)
os.write(fd, b"@@UBLK_RAID_VM_CRASH@@\n")
termios.tcdrain(fd)
' 2>/dev/null || { echo "@@UBLK_RAID_VM_CRASH@@" >/dev/console; sleep 1; }
echo b >/proc/sysrq-trigger
sleep 30
echo "crash.sh: the VM is still alive after sysrq-b" >&2
exit 1

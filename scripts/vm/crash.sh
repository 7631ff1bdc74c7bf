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
# The marker goes through printk (written out synchronously, so it cannot be
# lost in the tty buffer when the machine resets right after) and the console.
echo "<2>@@UBLK_RAID_VM_CRASH@@" >/dev/kmsg
echo "@@UBLK_RAID_VM_CRASH@@" >/dev/console
echo b >/proc/sysrq-trigger
sleep 30
echo "crash.sh: the VM is still alive after sysrq-b" >&2
exit 1

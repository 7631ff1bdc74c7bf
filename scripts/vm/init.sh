#!/bin/busybox sh
# /init of the ublk-raid test VM (runs inside the initramfs, busybox only).
# Built into the initramfs by scripts/vm/setup.sh; driven by scripts/vm/run.sh.
#
#  1. mounts proc/sys/devtmpfs, insmods the modules listed in /etc/modules.load
#  2. mounts the 9p shares: "ctl" (run.sh's per-run control dir: config +
#     cmd.sh), "host" (the host's / read-only) and optionally "out" (rw)
#  3. prepares the host root (proc, sys, dev, devpts, /dev/shm, configfs,
#     debugfs, tmpfs on /tmp /run /var/tmp /mnt, /mnt/out, guest modules on
#     /lib/modules) and chroots into it to run /run/ublk-raid-vm/cmd.sh
#  4. prints @@UBLK_RAID_VM_EXIT=<rc>@@ on the console and powers off.
# Any failure before the command runs ends with exit code 125.

export PATH=/bin:/sbin
R=/newroot
MSIZE=512000

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o mode=0755 devtmpfs /dev
exec </dev/console >/dev/console 2>&1

say() { echo "vm-init: $*"; }

finish() {
	# sync can hang on a wedged device (uninterruptibly): never wait for it
	# more than 30 s, the exit marker matters more.
	(sync && : >/synced) &
	i=0
	while [ ! -e /synced ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -e /synced ] || say "sync did not finish within 30s"
	# Console first (keeps the order with the command's output), then let the
	# tty drain and repeat it via printk, which is written out synchronously.
	echo "@@UBLK_RAID_VM_EXIT=$1@@"
	sleep 0.3
	echo "<2>@@UBLK_RAID_VM_EXIT=$1@@" >/dev/kmsg
	# poweroff runs device/reboot notifiers (md stops its arrays, ...), which
	# can hang too: reset the machine if it has not powered off in 10 s.
	(sleep 10 && echo b >/proc/sysrq-trigger) &
	poweroff -f
	sleep 60
}

fatal() {
	say "FATAL: $*"
	finish 125
}

kver=$(uname -r)
# One line per level; the modules of a level only depend on earlier levels.
while read -r level; do
	for ko in $level; do
		insmod "/lib/modules/$kver/$ko" || say "insmod $ko failed" &
	done
	wait
done </etc/modules.load

mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=none,ro ctl /ctl ||
	fatal "cannot mount the ctl share"
VM_CWD=/
VM_OUT=0
# shellcheck disable=SC1091
. /ctl/config

# Host root, read-only. cache=loose: the share is read-only from the guest and
# nothing on the host is expected to change under a running test, so let the
# guest page cache keep file data/metadata (much faster exec and reads).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=loose,ro host $R ||
	fatal "cannot mount the host root share"

mount -t proc -o nosuid,nodev,noexec proc $R/proc || fatal "mount $R/proc"
mount -t sysfs -o nosuid,nodev,noexec sysfs $R/sys || fatal "mount $R/sys"
mount -t devtmpfs -o mode=0755 devtmpfs $R/dev || fatal "mount $R/dev"
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts || fatal "mount devpts"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs $R/dev/shm || fatal "mount /dev/shm"
ln -sf /proc/self/fd $R/dev/fd
ln -sf /proc/self/fd/0 $R/dev/stdin
ln -sf /proc/self/fd/1 $R/dev/stdout
ln -sf /proc/self/fd/2 $R/dev/stderr
[ -d $R/sys/kernel/config ] && mount -t configfs configfs $R/sys/kernel/config
[ -d $R/sys/kernel/debug ] && mount -t debugfs debugfs $R/sys/kernel/debug

# If the working directory lives under one of the dirs that get a tmpfs, keep
# the host's copy of it visible: hold it, mount the tmpfs, bind it back.
hold=
case "$VM_CWD" in
/tmp/* | /run/* | /var/tmp/* | /mnt/*)
	mkdir -p /cwdhold
	mount --bind "$R$VM_CWD" /cwdhold && hold=1
	;;
esac
mount -t tmpfs -o mode=1777 tmpfs $R/tmp || fatal "mount /tmp"
mount -t tmpfs -o mode=0755 tmpfs $R/run || fatal "mount /run"
mount -t tmpfs -o mode=1777 tmpfs $R/var/tmp || fatal "mount /var/tmp"
mount -t tmpfs -o mode=0755 tmpfs $R/mnt || fatal "mount /mnt"
if [ -n "$hold" ]; then
	mkdir -p "$R$VM_CWD"
	mount --bind /cwdhold "$R$VM_CWD" || fatal "cannot bind $VM_CWD back"
fi

# Guest kernel modules (the host's /lib/modules is for other kernels), so that
# modprobe works inside the chroot: bind them over /lib/modules, or - if the
# host has no /lib/modules to mount over (read-only share) - put them under
# /run/ublk-raid-vm and point kmod's modprobe there via MODPROBE_OPTIONS.
modenv=
if [ -d $R/lib/modules ]; then
	mount --bind /lib/modules $R/lib/modules || say "cannot bind /lib/modules"
else
	mkdir -p $R/run/ublk-raid-vm/lib/modules
	mount --bind /lib/modules $R/run/ublk-raid-vm/lib/modules || say "cannot bind /lib/modules"
	modenv="MODPROBE_OPTIONS=-d/run/ublk-raid-vm"
fi

if [ "$VM_OUT" = 1 ]; then
	mkdir -p $R/mnt/out
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=mmap out $R/mnt/out ||
		fatal "cannot mount the out share"
fi

mkdir -p $R/run/ublk-raid-vm
cp /ctl/cmd.sh $R/run/ublk-raid-vm/cmd.sh || fatal "cannot copy cmd.sh"
umount /ctl

ip link set lo up
hostname ublk-raid-vm
echo 1 >/proc/sys/kernel/sysrq
# Boot quietly (loglevel=4), then let warnings (WARN_ON splats) reach the
# console too while the command runs; override: ublk_raid_vm.loglevel=N.
lvl=5
for a in $(cat /proc/cmdline); do
	case "$a" in ublk_raid_vm.loglevel=*) lvl=${a#*=} ;; esac
done
dmesg -n "$lvl"

echo "@@UBLK_RAID_VM_START@@"
chroot $R /usr/bin/env -i \
	PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/tmp TERM=dumb LANG=C.UTF-8 UBLK_RAID_VM=1 DM_DISABLE_UDEV=1 $modenv \
	/bin/sh /run/ublk-raid-vm/cmd.sh </dev/null
finish $?

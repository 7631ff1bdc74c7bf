#!/usr/bin/env bash
# Boot the ublk-raid test VM (a Debian 6.12 or 7.3 kernel, TCG) and run one command in
# it. Output streams to stdout; run.sh exits with the command's exit status.
#
# Usage: scripts/vm/run.sh [OPTIONS] -- COMMAND [ARGS...]
#
# Options:
#   --cpus N            guest CPUs (default 2)
#   --mem MiB           guest memory (default 2048)
#   --disk SIZE[,OPTS]  add a virtio-blk disk backed by a sparse raw file;
#                       guest /dev/vda, /dev/vdb, ... in order (serial "diskN",
#                       see /sys/block/vdX/serial). Repeatable. OPTS are extra
#                       qemu -drive options, e.g. throttling:
#                         --disk 1G,throttling.iops-total=200
#                         --disk 1G,iops=200          (legacy spelling, also ok)
#                         --disk 1G,throttling.bps-total=10M
#                       OPTS override the defaults (cache=, aio=, discard=):
#                         --disk 1G,cache=writethrough  (no volatile cache)
#   --nvme SIZE[,OPTS]  add an emulated NVMe controller with one namespace;
#                       guest /dev/nvme0n1, /dev/nvme1n1, ... (serial "nvmeN",
#                       see /sys/block/nvmeXn1/device/serial; NVMe probing is
#                       asynchronous, so check the serial if the order matters)
#   --disk-opt OPTS     extra -drive options for every disk (both kinds)
#   --disk-dir DIR      keep the disk files (diskN.img, nvmeN.img) in DIR and
#                       reuse existing ones (e.g. boot a second VM on the disks
#                       of a crashed one); default: fresh temp dir, removed
#   --out DIR           host dir shared read-write at /mnt/out in the guest
#                       (created if missing); the console log of every boot
#                       attempt is saved there as vm-console[.N].log
#   --env K=V           extra environment variable for the command (repeatable)
#   --timeout SEC       kill the VM after SEC seconds, exit 124 (default 1800)
#   --expect-crash      the command is expected to take the VM down abruptly
#                       via scripts/vm/crash.sh (prints @@UBLK_RAID_VM_CRASH@@,
#                       then sysrq 'b': immediate reset = power cut, no sync,
#                       no device shutdown). Then run.sh exits 0. If the command
#                       instead exits normally, run.sh exits with its status
#                       (1 if that was 0).
#   --retries N         reboot attempts when the VM vanishes (default 2)
#   --cmdline ARGS      extra kernel command line arguments
#   --qemu-arg ARG      extra qemu argument (repeatable)
#   -v, --verbose       print boot timing and VM details on stderr
#   -h, --help          this text
#
# The guest: busybox initramfs insmods the modules of scripts/vm/modules.list,
# mounts the host's / READ-ONLY over 9p (so the cwd is read-only too; write to
# /tmp or /mnt/out), mounts proc, sys, dev (devtmpfs), dev/pts, dev/shm,
# sys/kernel/config, sys/kernel/debug, tmpfs on /tmp /run /var/tmp /mnt, makes
# the guest kernel's modules visible to modprobe (bound on /lib/modules, or -
# when the host has no /lib/modules - under /run/ublk-raid-vm with
# MODPROBE_OPTIONS=-d/run/ublk-raid-vm; then use `modinfo -b /run/ublk-raid-vm`),
# chroots and runs COMMAND as root, stdin /dev/null, stdout+stderr on the
# serial console, in the current directory (same path as on the host; a cwd
# under /tmp, /run, /var/tmp or /mnt is kept visible), with only this env:
#   PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
#   HOME=/tmp TERM=dumb LANG=C.UTF-8 UBLK_RAID_VM=1
#   DM_DISABLE_UDEV=1 (no udev in the guest: libdevmapper makes /dev/mapper
#   nodes itself)  [MODPROBE_OPTIONS, see above]  + the --env variables
# COMMAND may be a shell snippet: run.sh -- sh -c 'cmd1 && cmd2'.
# Build Go test binaries on the host and run those: the guest has no network
# (no module downloads) and compiling under TCG takes many minutes.
# Kernel messages of level warning and worse (I/O errors, hung tasks, WARN
# splats, oopses) appear in the output while the command runs (boot is quiet;
# change with --cmdline ublk_raid_vm.loglevel=N); `dmesg` has the rest.
#
# Exit status: the command's; 124 on timeout (--timeout counts per boot
# attempt, boot included); 125 if the VM could not run it: qemu did not start,
# the guest init failed (message "vm-init: FATAL"), or the VM vanished (ended
# without the exit marker) on all attempts; with --expect-crash see above.
# The guest ends by printing @@UBLK_RAID_VM_EXIT=<rc>@@ (hidden from the
# output, like everything after it) and powering off.
#
# Disks use cache=none (O_DIRECT on the host file, the guest sees a volatile
# write cache, and a guest FLUSH becomes an fdatasync of the file) with
# aio=io_uring (falls back to native, threads, then cache=writeback if the host
# cannot do it) and discard=unmap (guest discards punch holes).
#
# Environment: UBLK_RAID_VM_KERNEL (6.12 or 7.3), UBLK_RAID_VM_CACHE,
# UBLK_RAID_VM_KERNEL_PKG (see setup.sh),
# UBLK_RAID_VM_QEMU (qemu binary, default qemu-system-x86_64),
# UBLK_RAID_VM_ACCEL (default tcg,thread=multi; /dev/kvm here is a PVM
# hypervisor that stock kernels die in, so no KVM),
# UBLK_RAID_VM_CPU (qemu -cpu, default max,la57=off,erms=off: see below).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QEMU=${UBLK_RAID_VM_QEMU:-qemu-system-x86_64}
ACCEL=${UBLK_RAID_VM_ACCEL:-tcg,thread=multi}
# erms=off: with ERMS the kernel copies user memory with `rep movsb`
# (rep_movs_alternative, copy_to_iter), which TCG emulates a byte per
# iteration while hardware moves whole lines. 7.x's ublk driver copies
# request data that way (6.12's used memcpy on mapped pages), so under TCG
# the copy alone cut its 1 MiB reads from 1087 to 395 MiB/s (side by side,
# docs/bench/kernel-7.3.md), a cost no hardware has. Without ERMS the
# same routine uses `rep movsq`, which TCG emulates 8 bytes at a time.
CPU_MODEL=${UBLK_RAID_VM_CPU:-max,la57=off,erms=off}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() {
	echo "vm: $*" >&2
	exit 2
}
say() { echo "vm: $*" >&2; }

cpus=2
mem=2048
timeout=1800
retries=2
expect_crash=0
verbose=0
disk_opt=
disk_dir=
out_dir=
extra_cmdline=
disks=()
nvmes=()
envs=()
qemu_extra=()

need() { [ "$#" -ge 2 ] || die "option $1 needs an argument"; }
while [ "$#" -gt 0 ]; do
	case "$1" in
	--cpus) need "$@"; cpus=$2; shift 2 ;;
	--mem) need "$@"; mem=$2; shift 2 ;;
	--disk) need "$@"; disks+=("$2"); shift 2 ;;
	--nvme) need "$@"; nvmes+=("$2"); shift 2 ;;
	--disk-opt) need "$@"; disk_opt=$2; shift 2 ;;
	--disk-dir) need "$@"; disk_dir=$2; shift 2 ;;
	--out) need "$@"; out_dir=$2; shift 2 ;;
	--env) need "$@"; envs+=("$2"); shift 2 ;;
	--timeout) need "$@"; timeout=$2; shift 2 ;;
	--retries) need "$@"; retries=$2; shift 2 ;;
	--expect-crash) expect_crash=1; shift ;;
	--cmdline) need "$@"; extra_cmdline=$2; shift 2 ;;
	--qemu-arg) need "$@"; qemu_extra+=("$2"); shift 2 ;;
	-v | --verbose) verbose=1; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) die "unknown option: $1 (try --help)" ;;
	esac
done
[ "$#" -gt 0 ] || die "no command given (usage: run.sh [OPTIONS] -- COMMAND [ARGS...])"
for v in "$cpus" "$mem" "$timeout" "$retries"; do
	[[ $v =~ ^[0-9]+$ ]] || die "not a number: $v"
done
for e in ${envs[@]+"${envs[@]}"}; do
	[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env wants K=V, got: $e"
done

paths=$("$HERE/setup.sh" --print-paths) || exit 125
KERNEL=$(sed -n 's/^KERNEL=//p' <<<"$paths")
INITRD=$(sed -n 's/^INITRD=//p' <<<"$paths")

work=$(mktemp -d "${TMPDIR:-/tmp}/ublk-raid-vm.XXXXXX")
qpid=
tpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ disks --
keep_disks=$disk_dir
if [ -n "$disk_dir" ]; then
	mkdir -p "$disk_dir"
	disk_dir=$(cd "$disk_dir" && pwd)
else
	disk_dir=$work/disks
	mkdir -p "$disk_dir"
fi

# mkdisk FILE SIZE: create a sparse file unless it exists.
mkdisk() {
	if [ -e "$1" ]; then
		if [ "$verbose" -eq 1 ]; then say "reusing $1 ($(stat -c %s "$1") bytes)"; fi
		return 0
	fi
	truncate -s "$2" "$1" || die "cannot create $1 with size $2"
}

# Pick cache/aio the host supports (O_DIRECT + io_uring preferred).
cache_aio=
probe_cache_aio() {
	local f=$1 c
	for c in cache=none,aio=io_uring cache=none,aio=native cache=none,aio=threads \
		cache=writeback,aio=threads; do
		if printf 'quit\n' | timeout 30 "$QEMU" -nodefaults -no-user-config -machine none \
			-display none -monitor stdio \
			-drive "file=$f,if=none,id=p,format=raw,file.locking=off,$c" >/dev/null 2>&1; then
			cache_aio=$c
			[ "$c" = cache=none,aio=io_uring ] || say "note: host disks use $c"
			return 0
		fi
	done
	die "qemu cannot open $f"
}

drive_args=()
disk_files=()
disk_sizes=()
add_drive() { # KIND INDEX SPEC
	local kind=$1 i=$2 spec=$3 size opts file
	size=${spec%%,*}
	opts=
	if [[ $spec == *,* ]]; then opts=,${spec#*,}; fi
	if [ -n "$disk_opt" ]; then opts="$opts,$disk_opt"; fi
	file=$disk_dir/$kind$i.img
	mkdisk "$file" "$size"
	disk_files+=("$file")
	disk_sizes+=("$size")
	[ -n "$cache_aio" ] || probe_cache_aio "$file"
	# Defaults unless OPTS set them (qemu rejects repeated keys).
	local defs= c
	for c in discard=unmap ${cache_aio//,/ }; do
		[[ $opts == *,"${c%%=*}"=* ]] || defs="$defs,$c"
	done
	# aio=native needs O_DIRECT: drop it if OPTS picked another cache mode.
	if [[ $opts == *,cache=* && $opts != *,cache=none* && $opts != *,cache=directsync* && $defs == *,aio=native* ]]; then
		defs=${defs/,aio=native/,aio=threads}
	fi
	drive_args+=(-drive "file=$file,if=none,id=$kind$i,format=raw$defs$opts")
	case "$kind" in
	disk) drive_args+=(-device "virtio-blk-pci,drive=$kind$i,serial=$kind$i") ;;
	nvme) drive_args+=(-device "nvme,drive=$kind$i,serial=$kind$i") ;;
	esac
}
i=0
for d in ${disks[@]+"${disks[@]}"}; do add_drive disk "$i" "$d"; i=$((i + 1)); done
i=0
for d in ${nvmes[@]+"${nvmes[@]}"}; do add_drive nvme "$i" "$d"; i=$((i + 1)); done

# ---------------------------------------------------------------- control --
# The per-run control dir (9p share "ctl"): init sources config, runs cmd.sh.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
mkdir -p "$work/ctl"
{
	echo "VM_CWD=$(q "$PWD")"
	echo "VM_OUT=$([ -n "$out_dir" ] && echo 1 || echo 0)"
} >"$work/ctl/config"
{
	echo "cd -- $(q "$PWD") || exit 125"
	for e in ${envs[@]+"${envs[@]}"}; do echo "export $(q "$e")"; done
	printf 'exec'
	for a in "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$work/ctl/cmd.sh"

share_args=(
	-virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$work/ctl,mount_tag=ctl,security_model=none,readonly=on"
)
if [ -n "$out_dir" ]; then
	mkdir -p "$out_dir"
	out_dir=$(cd "$out_dir" && pwd)
	share_args+=(-virtfs "local,path=$out_dir,mount_tag=out,security_model=none,multidevs=remap")
fi

# tsc=reliable: TCG's TSC follows the host clock; without it the clocksource
# watchdog marks it unstable under host load, which also live-patches kernel
# text (static keys), the kind of cross-CPU code patching MTTCG gets wrong.
# idle=halt: with -cpu max the guest idles in MWAIT and wakes a polling CPU by
# a memory write, which TCG does not emulate as a wake-up: cross-CPU wake-ups
# then wait for the next timer tick (4 ms), which cut ublk's QD1 IOPS 7x in a
# side-by-side run. HLT idle makes wake-ups IPIs, as on hardware.
cmdline="console=ttyS0 panic=-1 quiet loglevel=4 8250.nr_uarts=1 tsc=reliable idle=halt $extra_cmdline"

# ------------------------------------------------------------------- boot --
# console_filter START: stream the console: drop CRs, hide our markers, drop
# the kernel's power-off chatter after the exit marker, report boot time.
console_filter() {
	local line seen_exit=
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%$'\r'}
		case "$line" in
		*@@UBLK_RAID_VM_START@@*)
			if [ "$verbose" -eq 1 ]; then
				say "command starting $(elapsed "$1")s after qemu start"
			fi
			continue
			;;
		*@@UBLK_RAID_VM_EXIT=*@@*) seen_exit=1 ;;
		esac
		[ -n "$seen_exit" ] || printf '%s\n' "$line"
	done
}

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }

# boot_once ATTEMPT: run the VM once, console into $work/console.ATTEMPT.log.
# Sets: vm_rc (command exit code or ""), vm_crashed (0/1), vm_timedout (0/1),
# qemu_status (exit status of qemu, or of timeout(1) around it).
boot_once() {
	local n=$1 log=$work/console.$1.log qrc=0 start
	: >"$log"
	vm_rc=
	vm_crashed=0
	vm_timedout=0
	start=$EPOCHREALTIME
	timeout -k 10 "$timeout" "$QEMU" \
		-name ublk-raid-vm -nodefaults -no-user-config \
		-machine pc -accel "$ACCEL" -cpu "$CPU_MODEL" \
		-smp "$cpus" -m "$mem" \
		-display none -monitor none -no-reboot \
		-chardev "file,id=con,path=$log" -serial chardev:con \
		-kernel "$KERNEL" -initrd "$INITRD" -append "$cmdline" \
		-device virtio-rng-pci \
		"${share_args[@]}" ${drive_args[@]+"${drive_args[@]}"} \
		${qemu_extra[@]+"${qemu_extra[@]}"} \
		</dev/null >"$work/qemu.$n.out" 2>&1 &
	qpid=$!
	tail -n +1 -F --pid="$qpid" "$log" 2>/dev/null | console_filter "$start" &
	tpid=$!
	wait "$qpid" || qrc=$?
	qpid=
	qemu_status=$qrc
	wait "$tpid" || true
	tpid=
	if [ "$verbose" -eq 1 ]; then say "qemu exited (status $qrc) after $(elapsed "$start")s"; fi
	if [ -n "$out_dir" ]; then
		if [ "$n" -eq 0 ]; then cp "$log" "$out_dir/vm-console.log"; else cp "$log" "$out_dir/vm-console.$n.log"; fi
	fi
	vm_rc=$(tr -d '\r' <"$log" | sed -n 's/.*@@UBLK_RAID_VM_EXIT=\([0-9]*\)@@.*/\1/p' | tail -n 1)
	grep -q '@@UBLK_RAID_VM_CRASH@@' "$log" && vm_crashed=1
	if [ -z "$vm_rc" ] && { [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; }; then
		vm_timedout=1
	fi
	if { [ -z "$vm_rc" ] || [ "$verbose" -eq 1 ]; } && [ -s "$work/qemu.$n.out" ]; then
		sed 's/^/vm: qemu: /' "$work/qemu.$n.out" >&2
	fi
	return 0
}

if [ "$verbose" -eq 1 ]; then
	say "kernel $KERNEL"
	say "initrd $INITRD"
	say "disks in $disk_dir ($cache_aio)"
fi

attempt=0
while :; do
	boot_once "$attempt"
	if [ "$vm_timedout" -eq 0 ] && [ "$qemu_status" -ne 0 ] && [ ! -s "$work/console.$attempt.log" ]; then
		say "FAILED: qemu did not start (status $qemu_status)"
		exit 125
	fi
	if [ -n "$vm_rc" ]; then
		if [ "$expect_crash" -eq 1 ]; then
			say "--expect-crash: the command exited normally (status $vm_rc) instead of crashing the VM"
			[ "$vm_rc" -eq 0 ] && exit 1
		fi
		exit "$vm_rc"
	fi
	if [ "$vm_timedout" -eq 1 ]; then
		say "TIMEOUT: killed the VM after ${timeout}s"
		exit 124
	fi
	if [ "$expect_crash" -eq 1 ] && [ "$vm_crashed" -eq 1 ]; then
		if [ "$verbose" -eq 1 ]; then say "VM went down after the crash marker, as expected"; fi
		exit 0
	fi
	if grep -q 'Kernel panic' "$work/console.$attempt.log"; then
		say "the guest kernel panicked (see the output above)"
	fi
	if [ "$attempt" -ge "$retries" ]; then
		say "FAILED: the VM vanished without an exit marker on all $((attempt + 1)) attempts"
		exit 125
	fi
	if [ "$expect_crash" -eq 1 ] && [ -n "$keep_disks" ] && grep -q '@@UBLK_RAID_VM_START@@' "$work/console.$attempt.log"; then
		# A rerun would start the command again on kept disks it has
		# already changed (a crash test's first boot would meet its own
		# array): report, do not retry.
		say "FAILED: the VM vanished after the command started, without the crash marker (the disks it changed are kept: no rerun)"
		exit 125
	fi
	attempt=$((attempt + 1))
	if [ -z "$keep_disks" ]; then # fresh temp disks for the rerun
		for i in "${!disk_files[@]}"; do
			rm -f "${disk_files[$i]}"
			truncate -s "${disk_sizes[$i]}" "${disk_files[$i]}"
		done
	fi
	say "WARNING: the VM vanished without an exit marker; rerunning (attempt $((attempt + 1)) of $((retries + 1)))"
done

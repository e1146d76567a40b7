#!/bin/bash
# qemu-numa-check.sh - boots a real Linux kernel under QEMU (TCG) with a
# CPU-less NUMA node that carries HMAT latency and bandwidth figures, which is
# how a host with CXL memory in kmem mode looks, and runs a static test
# program inside (scripts/qemu-numa-guest.c) that calls
# cxlp_topo_discover(NULL) on the guest's live sysfs, checks the memory-only
# node and its HMAT figures, checks that mbind places pages there, and
# migrates a dataset both ways between a dram tier on node 0 and a cxl tier
# on node 1 under four verifying readers, checking with move_pages and
# get_mempolicy that every copy's pages are on its tier's node.
#
# With --cxl it then boots a second guest with an emulated CXL type-3 device
# (q35, pxb-cxl, cxl-rp, cxl-type3; persistent memory on QEMU 7.2), loads
# the kernel's CXL modules, and checks what discovery reads from the real
# /sys/bus/cxl/devices: the memdev and its capacity, ports, decoders.
#
# With --hosts it boots two guests at the same time on one memory: the same
# host file (256 MiB under /dev/shm) is an ivshmem device in both, i.e. two
# kernels sharing a pool the way hosts behind a CXL switch do. Guest A
# formats a pool in the device's BAR (pci: spec), ingests and publishes;
# guest B attaches, lists, reads and verifies every record, then writes;
# guest A reads what B wrote. Both guests' verdicts are printed.
#
# With --region it boots a guest whose CXL type-3 device gets a region:
# `cxl create-region` (persistent memory: QEMU 7.2's cxl-type3 has no
# volatile memdev), `ndctl create-namespace -m devdax` gives /dev/daxX.Y; a
# pool there is created, ingested, read by a loader and verified, then
# checked with `cxlpool verify`, destroyed, and the device is a pool tier
# too; then `daxctl reconfigure-device --mode=system-ram` onlines the same
# memory as a memory-only node (kmem), which `cxlpool topo` and discovery
# must call CXL, and a dataset migrates between a dram tier on node 0 and a
# cxl tier on that node under 2 reading processes, move_pages confirming
# each copy's node after each move. Debian's cxl, ndctl and daxctl run in
# the guest (copied in with their shared libraries).
#
# With --fabric it boots two guests joined by a QEMU socket network (UDP on
# 127.0.0.1, link-local addresses inside): guest "target" exports its
# QEMU-emulated NVMe namespace with nvmet/nvmet-tcp through configfs; guest
# "fabric" connects with `nvme connect -t tcp` (nvme-cli) and makes the
# namespace (/dev/nvmeXnY, the block device itself) the home tier of a
# pool: ingest, an epoch staged with io_uring O_DIRECT, every record once
# and byte-exact; a second epoch during which the script kills the target's
# QEMU (asked for on the console), which must end with an error naming the
# tier and shard within a limit; then the script boots the target again,
# the kernel reconnects, and a third epoch reads every record correctly.
#
# Prints PASS or FAIL and exits 0 or 1; exits 77 (skip) with a reason when
# qemu, busybox-static, a static toolchain or the Debian kernel package is
# unavailable; --region and --fabric print a SKIP line with the reason and
# go on without that guest where their tools (ndctl, daxctl; nvme-cli) are
# missing. Needs no root: the kernel is fetched with `apt-get download`
# and unpacked with `dpkg-deb -x`.
#
# Environment:
#   KERNEL=/path/vmlinuz   use this kernel instead of fetching one
#   MODULES=dir            with KERNEL=: its modules (e.g. /lib/modules/VER),
#                          searched for NAME.ko[.xz] with their depends=
#   KEEP=1                 keep the build directory
#   QEMU_TIMEOUT=seconds   limit per guest (default 180; the fabric host's
#                          is 2.5 times as long: it outlives two targets)
#   FABRIC_FAST_IO_FAIL=s  --fabric: the connection's fast_io_fail_tmo
#                          (default 2; "off" leaves the kernel's: I/O then
#                          waits for the controller until ctrl_loss_tmo)
#   FABRIC_CTRL_LOSS=s     --fabric: its ctrl_loss_tmo (default 300)
#
# Build files live under /tmp: a per-run directory, and a kernel cache
# (/tmp/cxlp-qemu-kernel2.$UID: the image and the modules the guests load,
# with what they depend on) so later runs skip the download.
#
# Why TCG: KVM is not usable on nested machines (the guest hangs at
# "Booting from ROM"); TCG boots these guests in seconds. Why a static
# program and busybox: the initramfs then needs no shared libraries.
set -u

with_cxl=0
with_hosts=0
with_region=0
with_fabric=0
for arg in "$@"; do
    case $arg in
    --cxl) with_cxl=1 ;;
    --hosts) with_hosts=1 ;;
    --region) with_region=1 ;;
    --fabric) with_fabric=1 ;;
    *) echo "usage: $0 [--cxl] [--hosts] [--region] [--fabric]" >&2; exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
timeout_s=${QEMU_TIMEOUT:-180}
lat0=80 bw0=100 lat1=250 bw1=32        # ns, GiB/s as QEMU takes them

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
busybox=$(command -v busybox) || skip "busybox not installed (apt-get install busybox-static)"
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' ||
    ldd "$busybox" 2>&1 | grep -q 'not a dynamic executable' ||
    skip "$busybox is not static (apt-get install busybox-static)"
command -v cpio >/dev/null || skip "cpio not installed"
command -v gcc >/dev/null || skip "gcc not installed"

work=$(mktemp -d /tmp/cxlp-qemu-numa.XXXXXX) || fail "mktemp"
[ -n "$work" ] && [ -d "$work" ] || fail "mktemp"
shared=/dev/shm/cxlp-qemu-hosts.$$
# a guest still running when the script ends (a failure, a signal) is killed
cleanup() {
    local f
    for f in "$work"/qemu-*.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -f "$shared"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
[ "${KEEP:-0}" = 1 ] && echo "build directory: $work"

# The modules each guest loads, by name; the files and what they depend on
# (each module's depends=) are found by resolve_modules.
cxl_mods="cxl_acpi cxl_pci cxl_mem libnvdimm cxl_pmem"
region_mods="$cxl_mods nd_pmem dax_pmem device_dax kmem"
net_mods="virtio_pci virtio_net"
target_mods="nvme nvmet-tcp $net_mods"
fabric_mods="nvme-tcp $net_mods"

# resolve_modules DIR NAME...: the files of the modules NAME under DIR and
# of everything they depend on, in an order insmod can load them (a
# module's depends= before it). There is no depmod on the host to ask.
resolve_modules() {
    local dir=$1
    shift
    declare -A seen=()
    local out=()
    visit() {
        local n=$1 f d x
        [ -n "${seen[$n]:-}" ] && return 0
        seen[$n]=1
        f=$(find "$dir" \( -name "$n.ko" -o -name "$n.ko.xz" -o -name "${n//-/_}.ko" \
                 -o -name "${n//-/_}.ko.xz" -o -name "${n//_/-}.ko" -o -name "${n//_/-}.ko.xz" \) \
                 2>/dev/null | head -1)
        [ -n "$f" ] || { echo "module $n not under $dir" >&2; return 1; }
        case $f in
        *.xz) d=$(xz -dc "$f" | tr '\0' '\n' | grep -a '^depends=') ;;
        *) d=$(tr '\0' '\n' <"$f" | grep -a '^depends=') ;;
        esac
        d=${d#depends=}
        for x in ${d//,/ }; do visit "$x" || return 1; done
        out+=("$f")
    }
    for n in "$@"; do visit "$n" || return 1; done
    printf '%s\n' "${out[@]}"
}

# --- the kernel (and the modules the guests load) ---
kernel=${KERNEL:-}
moddir=
if [ -z "$kernel" ]; then
    # kernel2: the image and the modules of every guest with what they
    # depend on (the kernel.$UID cache of earlier versions of this script
    # held only drivers/cxl and drivers/nvdimm; both may be in use at once)
    cache=/tmp/cxlp-qemu-kernel2.$(id -u)
    kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    if [ -z "$kernel" ] || [ ! -f "$cache/modules/v2" ]; then
        command -v apt-get >/dev/null || skip "no apt-get to fetch a kernel (set KERNEL=)"
        pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
              awk '{print $1}' | sort -V | tail -1)
        [ -n "$pkg" ] || skip "no linux-image-6.1.0-*-amd64 package known to apt"
        rm -rf "$cache.dl" && mkdir -p "$cache.dl" || fail "mkdir $cache.dl"
        (cd "$cache.dl" && apt-get download "$pkg" >/dev/null 2>&1) ||
            skip "apt-get download $pkg failed (offline?)"
        rm -rf "$cache.tmp" && mkdir -p "$cache.tmp/x" "$cache.tmp/modules" &&
            dpkg-deb -x "$cache.dl"/"$pkg"_*.deb "$cache.tmp/x" || fail "dpkg-deb -x $pkg"
        # keep the image and the modules the guests load, not hundreds of MiB
        mv "$cache.tmp/x/boot" "$cache.tmp/boot" || fail "unpacking $pkg"
        kmods=$(ls -d "$cache.tmp"/x/lib/modules/*/kernel | head -1)
        files=$(resolve_modules "$kmods" $region_mods $target_mods $fabric_mods) ||
            fail "modules of $pkg"
        for f in $files; do
            mkdir -p "$cache.tmp/modules/$(dirname "${f#"$kmods"/}")" &&
                cp "$f" "$cache.tmp/modules/${f#"$kmods"/}" || fail "copy $f"
        done
        touch "$cache.tmp/modules/v2"
        rm -rf "$cache.tmp/x" "$cache.dl"
        rm -rf "$cache" && mv "$cache.tmp" "$cache" || fail "cache $cache"
        kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    fi
    moddir=$cache/modules
elif [ $((with_cxl + with_region + with_fabric)) -gt 0 ]; then
    moddir=${MODULES:-}
    [ -n "$moddir" ] || skip "--cxl, --region, --fabric with KERNEL= need MODULES=dir (e.g. /lib/modules/VERSION)"
fi
[ -n "$kernel" ] && [ -r "$kernel" ] || skip "kernel image $kernel not readable"
echo "kernel: $kernel"

# --- the guest program, static, from the library sources ---
for lib in libnuma.a liburing.a libc.a; do
    [ -n "$(find /usr/lib /usr/lib64 -name "$lib" 2>/dev/null | head -1)" ] ||
        skip "$lib not installed (static build of the guest program)"
done
# the library's objects once, for the guest program and (below) the CLI;
# libnuma linked in (CXLP_NUMA_LINKED: a static program loads nothing);
# xxHash from third_party/, as the library builds it
cflags="-O2 -std=c11 -D_GNU_SOURCE -DCXLP_NUMA_LINKED -Wall -Wextra -Werror -I$src/include -I$src/src -I$src/third_party/xxhash"
mkdir -p "$work/obj" && (cd "$work/obj" && gcc -c $cflags "$src"/src/*/*.c "$src/third_party/xxhash/xxhash.c" 2>"$work/cc.log") &&
    gcc -static $cflags "$work"/obj/*.o "$here/qemu-numa-guest.c" \
        -o "$work/guest" -lnuma -luring -lpthread 2>"$work/cc.log" ||
    { cat "$work/cc.log"; fail "static build of the guest program failed"; }

# --- the tools the region and fabric guests run: Debian's, with their
# shared libraries; a guest whose tools are missing is skipped, with why ---
if [ "$with_region" = 1 ]; then
    for t in cxl ndctl daxctl; do
        command -v $t >/dev/null && continue
        echo "SKIP: --region: $t not installed (apt-get install ndctl daxctl)"
        with_region=0
        break
    done
fi
if [ "$with_fabric" = 1 ] && ! command -v nvme >/dev/null; then
    echo "SKIP: --fabric: nvme not installed (apt-get install nvme-cli)"
    with_fabric=0
fi
if [ $((with_region + with_fabric)) -gt 0 ]; then
    # the CLI too: cxlpool verify and cxlpool topo run in the guests
    gcc -static $cflags "$work"/obj/*.o "$src"/tools/*.c \
        -o "$work/cxlpool" -lnuma -luring -lpthread -lm 2>"$work/cc.log" ||
        { cat "$work/cc.log"; fail "static build of cxlpool failed"; }
fi

# --- the initramfs: the base one, and one with the tools for the region
# and fabric guests (what the others need stays small and quick to load) ---
root=$work/initramfs
mkdir -p "$root"/bin "$root"/dev "$root"/proc "$root"/sys "$root"/tmp "$root"/modules ||
    fail "mkdir initramfs"
cp "$busybox" "$root/bin/busybox" && cp "$work/guest" "$root/bin/guest" || fail "copy into initramfs"
for a in sh mount mkdir echo cat poweroff sleep insmod hostname ls grep head seq ip; do
    ln -s busybox "$root/bin/$a"
done

# add_modules ROOT GROUP NAME...: the modules NAME and their dependencies
# into ROOT/modules, their load order in ROOT/modules/GROUP.order; status 1
# when one is not in $moddir
add_modules() {
    local r=$1 group=$2 f m files
    shift 2
    files=$(resolve_modules "$moddir" "$@") || return 1
    : >"$r/modules/$group.order"
    for f in $files; do
        m=$(basename "$f" .xz)
        case $f in
        *.xz) xz -dc "$f" >"$r/modules/$m" || fail "xz $f" ;;
        *) cp "$f" "$r/modules/$m" || fail "copy $f" ;;
        esac
        echo "$m" >>"$r/modules/$group.order"
    done
}

# add_program ROOT PATH: the program and the shared libraries ldd names
add_program() {
    local r=$1 p=$2 l
    cp "$p" "$r/bin/" || fail "copy $p"
    for l in $(ldd "$p" 2>/dev/null | grep -o '/[^ ]*'); do
        [ -e "$r$l" ] && continue
        mkdir -p "$r$(dirname "$l")" && cp -L "$l" "$r$l" || fail "copy $l"
    done
}

if [ "$with_cxl" = 1 ]; then
    add_modules "$root" cxl $cxl_mods || skip "modules for the cxl guest not in $moddir"
fi
# The kernel hands unknown name=value parameters to init as environment.
cat >"$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
# a host keeps its host id under /var/lib/cxlpool (made at the first attach)
mkdir -p /var/lib /run
hostname "$CXLP_GUEST"
load() {   # a group's modules, in the order the script resolved
    for m in $(cat /modules/$1.order); do insmod /modules/$m || echo "insmod $m failed"; done
}
case $CXLP_GUEST in
cxl|region) load $CXLP_GUEST; sleep 2 ;;   # CXL probing is asynchronous
target|fabric) load $CXLP_GUEST ;;
esac
echo "GUEST-START"
if [ -f /guest.sh ]; then
    . /guest.sh
else
    /bin/guest $CXLP_GUEST
    echo "GUEST-EXIT $?"
fi
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz") || fail "cpio"

if [ $((with_region + with_fabric)) -gt 0 ]; then
    xroot=$work/initramfs-x
    cp -a "$root" "$xroot" && cp "$work/cxlpool" "$xroot/bin/cxlpool" || fail "copy initramfs"
    if [ "$with_region" = 1 ]; then
        for t in cxl ndctl daxctl; do add_program "$xroot" "$(command -v $t)"; done
        add_modules "$xroot" region $region_mods ||
            { echo "SKIP: --region: its modules are not in $moddir"; with_region=0; }
    fi
    if [ "$with_fabric" = 1 ]; then
        add_program "$xroot" "$(command -v nvme)"
        { add_modules "$xroot" target $target_mods && add_modules "$xroot" fabric $fabric_mods; } ||
            { echo "SKIP: --fabric: its modules are not in $moddir"; with_fabric=0; }
        mkdir -p "$xroot/etc/nvme"
        echo "nqn.2014-08.org.nvmexpress:uuid:2029c0de-0000-4000-8000-000000000029" \
            >"$xroot/etc/nvme/hostnqn"
        echo "2029c0de-0000-4000-8000-000000000029" >"$xroot/etc/nvme/hostid"
    fi
    cp "$here/qemu-guest-steps.sh" "$xroot/guest.sh" || fail "copy the guest steps"
    (cd "$xroot" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd-x.gz") ||
        fail "cpio"
fi

# run_qemu NAME LIMIT INITRD QEMU-ARGS...: one guest, its console in
# console-NAME.log (appended: a guest booted twice keeps both), its pid in
# qemu-NAME.pid; the exit status of qemu (124: over LIMIT seconds)
run_qemu() {
    local name=$1 limit=$2 initrd=$3
    shift 3
    timeout "$limit" qemu-system-x86_64 -accel tcg -cpu max -smp 2 \
        -nographic -no-reboot -kernel "$kernel" -initrd "$initrd" -pidfile "$work/qemu-$name.pid" \
        -append "console=ttyS0 quiet panic=-1 CXLP_GUEST=$name QEMU_EXPECT_LAT0=$lat0 QEMU_EXPECT_LAT1=$lat1 QEMU_EXPECT_BW1=$((bw1 * 1024)) ${GUEST_ENV:-}" \
        "$@" </dev/null >>"$work/console-$name.log" 2>&1
}

# the guest's own output from its start marker on, without terminal codes
console() {
    tr -d '\r' <"$work/console-$1.log" | sed -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' |
        sed -n '/GUEST-START/,$p'
}

# boot NAME QEMU-ARGS...: runs one guest, shows its output; status 0 when
# the guest program passed. INITRD= picks the initramfs, LIMIT= the time.
boot() {
    local name=$1
    shift
    local start qrc elapsed limit=${LIMIT:-$timeout_s} log=$work/console-$name.log
    start=$(date +%s)
    rm -f "$log"
    run_qemu "$name" "$limit" "${INITRD:-$work/initrd.gz}" "$@"
    qrc=$?
    elapsed=$(( $(date +%s) - start ))
    echo "=== guest $name"
    console "$name"
    echo "guest $name ran ${elapsed}s (qemu exit $qrc)"
    if [ $qrc -eq 124 ]; then
        tail -20 "$log"
        echo "guest $name did not power off within ${limit}s"
        return 1
    fi
    grep -q 'GUEST-START' "$log" || tail -20 "$log"
    # the last verdict decides: a guest running several programs prints
    # theirs, then its own
    tr -d '\r' <"$log" | grep -E '^GUEST-(PASS|FAIL)' | tail -1 | grep -q '^GUEST-PASS'
}

result=0
failed_guests=()
# guest_failed NAME: counts the guest as failed; its console's end is shown
# again after the last guest, where a log cut to its tail still has it
guest_failed() {
    result=1
    failed_guests+=("$1")
}
# twice NAME COMMAND...: runs the guest's command, and once more when it
# fails (its first console kept as console-NAME.first.log); a guest that
# passes only the second time passes, and is named at the end
second_boot=()
twice() {
    local name=$1
    shift
    "$@" && return 0
    cp "$work/console-$name.log" "$work/console-$name.first.log" 2>/dev/null
    echo "=== guest $name failed; booting it once more (the first console's end is shown at the end)"
    "$@" || return 1
    second_boot+=("$name")
}

twice numa boot numa -m 2G -machine hmat=on \
    -object memory-backend-ram,size=1G,id=m0 -object memory-backend-ram,size=1G,id=m1 \
    -numa node,nodeid=0,memdev=m0,cpus=0-1 -numa node,nodeid=1,memdev=m1,initiator=0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=$lat0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw0}G \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=$lat1 \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw1}G ||
    guest_failed numa

# cxl_device NAME: QEMU's arguments for a CXL type-3 device (256 MiB of
# persistent memory, its label storage area) behind a host bridge and root
# port, with a 4 GiB fixed memory window; backed by files of the run. The
# host bridge has a second, empty root port: with one, Linux treats the
# bridge as pass-through and leaves its HDM decoder unprogrammed, and QEMU
# 7.2 then routes no access to the device (a region's memory reads zeros
# and drops every store)
cxl_device() {
    echo "-M q35,cxl=on -m 1G,maxmem=4G,slots=4" \
        "-object memory-backend-file,id=cxl-mem1,share=on,mem-path=$work/$1-mem.raw,size=256M" \
        "-object memory-backend-file,id=cxl-lsa1,share=on,mem-path=$work/$1-lsa.raw,size=256M" \
        "-device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1" \
        "-device cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2" \
        "-device cxl-rp,port=1,bus=cxl.1,id=root_port14,chassis=0,slot=3" \
        "-device cxl-type3,bus=root_port13,memdev=cxl-mem1,lsa=cxl-lsa1,id=cxl-pmem0" \
        "-M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"
}

# shellcheck disable=SC2046
[ "$with_cxl" = 1 ] && { twice cxl boot cxl $(cxl_device cxl) || guest_failed cxl; }

# shellcheck disable=SC2046
[ "$with_region" = 1 ] && { INITRD=$work/initrd-x.gz twice region boot region $(cxl_device region) || guest_failed region; }

# a UDP port of the loopback that nothing holds now
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        grep -qi ":$(printf %04X $p) " /proc/net/udp 2>/dev/null || { echo $p; return; }
    done
}

# wait_line NAME LINE PID: until the console of guest NAME has LINE, or the
# process PID (the guest watched) ends; 0 when the line came
wait_line() {
    while ! { [ -f "$work/console-$1.log" ] && tr -d '\r' <"$work/console-$1.log" |
              grep -q "^$2"; }; do
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.5
    done
}

# The fabric: the target guest exports its NVMe namespace, the fabric guest
# reads the archive from it; the script kills the target when the fabric
# guest asks (mid-epoch) and boots it again when it asks for that.
fabric() {
    local pt ph nt nh tp hp rc t0 tstop tback
    pt=$(free_port)
    ph=$(free_port)
    # a second try must not find the first one's lines and pid: the
    # watcher below would read the first try's FABRIC-STOP-TARGET before
    # the new console exists and kill a target that is already gone
    rm -f "$work/nvme.raw" "$work"/console-{target,fabric}.log "$work"/qemu-{target,fabric}.pid &&
        truncate -s 64M "$work/nvme.raw" ||
        fail "cannot make $work/nvme.raw"
    nt="-netdev socket,id=n0,udp=127.0.0.1:$ph,localaddr=127.0.0.1:$pt -device virtio-net-pci,netdev=n0,mac=52:54:00:c0:29:01"
    nh="-netdev socket,id=n0,udp=127.0.0.1:$pt,localaddr=127.0.0.1:$ph -device virtio-net-pci,netdev=n0,mac=52:54:00:c0:29:02"
    local disk="-drive file=$work/nvme.raw,if=none,id=nv0,format=raw -device nvme,serial=cxlp29,drive=nv0"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    run_qemu target "$timeout_s" "$work/initrd-x.gz" -m 512M $nt $disk &
    tp=$!
    # the fabric guest outlives two targets: its limit is longer
    # shellcheck disable=SC2086
    INITRD=$work/initrd-x.gz LIMIT=$((timeout_s * 5 / 2)) \
        GUEST_ENV="CXLP_FAST_IO_FAIL=${FABRIC_FAST_IO_FAIL:-2} CXLP_CTRL_LOSS=${FABRIC_CTRL_LOSS:-300}" \
        boot fabric -m 512M $nh \
        >"$work/fabric.out" 2>&1 &
    hp=$!
    if wait_line fabric FABRIC-STOP-TARGET $hp; then
        tstop=$(date +%s)
        if kill -9 "$(cat "$work/qemu-target.pid" 2>/dev/null)" 2>/dev/null; then
            { wait $tp; } 2>/dev/null
            echo "=== target killed (SIGKILL to its QEMU) $((tstop - t0))s into the run"
        else
            echo "=== the target's QEMU could not be killed (pid file: $(cat "$work/qemu-target.pid" 2>&1))"
        fi
        if wait_line fabric FABRIC-START-TARGET $hp; then
            tback=$(date +%s)
            echo "=== target booted again $((tback - tstop))s after the kill"
            # shellcheck disable=SC2086
            run_qemu target "$timeout_s" "$work/initrd-x.gz" -m 512M $nt $disk &
            tp=$!
        fi
    fi
    wait $hp
    rc=$?
    kill -9 "$(cat "$work/qemu-target.pid" 2>/dev/null)" 2>/dev/null
    { wait $tp; } 2>/dev/null
    echo "=== guest target (both boots)"
    console target
    cat "$work/fabric.out"
    echo "fabric guests ran $(( $(date +%s) - t0 ))s in all"
    return $rc
}

[ "$with_fabric" = 1 ] && { twice fabric fabric || guest_failed fabric; }

if [ "$with_hosts" = 1 ]; then
    # two kernels, one memory: both guests run at once on the same host file
    rm -f "$shared" && truncate -s 256M "$shared" || fail "cannot make $shared"
    ivshmem="-object memory-backend-file,id=shm,mem-path=$shared,size=256M,share=on -device ivshmem-plain,memdev=shm"
    # shellcheck disable=SC2086
    boot hostA -m 512M $ivshmem >"$work/hostA.out" 2>&1 &
    pa=$!
    # shellcheck disable=SC2086
    boot hostB -m 512M $ivshmem >"$work/hostB.out" 2>&1 &
    pb=$!
    wait $pa
    ra=$?
    wait $pb
    rb=$?
    cat "$work/hostA.out" "$work/hostB.out"
    [ $ra = 0 ] || guest_failed hostA
    [ $rb = 0 ] || guest_failed hostB
fi

for g in "${second_boot[@]}"; do
    echo "=== guest $g passed only when booted a second time; the end of its first console:"
    tr -d '\r' <"$work/console-$g.first.log" | sed -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' | tail -40
done
[ "${#second_boot[@]}" -gt 0 ] && echo "NOTE: passed on a second boot: ${second_boot[*]}"
[ $result = 0 ] && { echo PASS; exit 0; }
for g in "${failed_guests[@]}"; do
    echo "=== guest $g failed; the end of its console:"
    tr -d '\r' <"$work/console-$g.log" | sed -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' | tail -40
done
[ "${#failed_guests[@]}" -gt 0 ] && [[ " ${failed_guests[*]} " == *" fabric "* ]] && [ -f "$work/console-target.log" ] && {
    echo "=== the fabric's target, the end of its console:"
    tr -d '\r' <"$work/console-target.log" | tail -20
}
fail "guest checks did not pass: ${failed_guests[*]}"

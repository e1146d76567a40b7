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
# Prints PASS or FAIL and exits 0 or 1; exits 77 (skip) with a reason when
# qemu, busybox-static, a static toolchain or the Debian kernel package is
# unavailable. Needs no root: the kernel is fetched with `apt-get download`
# and unpacked with `dpkg-deb -x`.
#
# Environment:
#   KERNEL=/path/vmlinuz   use this kernel instead of fetching one
#   MODULES=dir            with KERNEL= and --cxl: dir/cxl/*.ko, dir/nvdimm/*.ko
#   KEEP=1                 keep the build directory
#   QEMU_TIMEOUT=seconds   limit per guest (default 180)
#
# Build files live under /tmp: a per-run directory, and a kernel cache
# (/tmp/cxlp-qemu-kernel.$UID: the image and the CXL/NVDIMM modules only) so
# later runs skip the download.
#
# Why TCG: KVM is not usable on nested machines (the guest hangs at
# "Booting from ROM"); TCG boots these guests in seconds. Why a static
# program and busybox: the initramfs then needs no shared libraries.
set -u

with_cxl=0
with_hosts=0
for arg in "$@"; do
    case $arg in
    --cxl) with_cxl=1 ;;
    --hosts) with_hosts=1 ;;
    *) echo "usage: $0 [--cxl] [--hosts]" >&2; exit 2 ;;
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
if [ "${KEEP:-0}" = 1 ]; then
    echo "build directory: $work"
    trap 'rm -f "$shared"' EXIT
else
    trap 'rm -rf "$work"; rm -f "$shared"' EXIT
fi

# --- the kernel (and the CXL and NVDIMM modules --cxl loads) ---
kernel=${KERNEL:-}
moddir=
if [ -z "$kernel" ]; then
    cache=/tmp/cxlp-qemu-kernel.$(id -u)
    kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    if [ -z "$kernel" ] || [ ! -d "$cache/modules/cxl" ]; then
        command -v apt-get >/dev/null || skip "no apt-get to fetch a kernel (set KERNEL=)"
        pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
              awk '{print $1}' | sort -V | tail -1)
        [ -n "$pkg" ] || skip "no linux-image-6.1.0-*-amd64 package known to apt"
        rm -rf "$cache.dl" && mkdir -p "$cache.dl" || fail "mkdir $cache.dl"
        (cd "$cache.dl" && apt-get download "$pkg" >/dev/null 2>&1) ||
            skip "apt-get download $pkg failed (offline?)"
        rm -rf "$cache.tmp" && mkdir -p "$cache.tmp/x" "$cache.tmp/modules" &&
            dpkg-deb -x "$cache.dl"/"$pkg"_*.deb "$cache.tmp/x" || fail "dpkg-deb -x $pkg"
        # keep the image and the few modules --cxl loads, not hundreds of MiB
        mv "$cache.tmp/x/boot" "$cache.tmp/boot" &&
            cp -r "$cache.tmp"/x/lib/modules/*/kernel/drivers/cxl \
                  "$cache.tmp"/x/lib/modules/*/kernel/drivers/nvdimm "$cache.tmp/modules/" ||
            fail "unpacking $pkg"
        rm -rf "$cache.tmp/x" "$cache.dl"
        rm -rf "$cache" && mv "$cache.tmp" "$cache" || fail "cache $cache"
        kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    fi
    moddir=$cache/modules
elif [ "$with_cxl" = 1 ]; then
    moddir=${MODULES:-}
    [ -n "$moddir" ] || skip "--cxl with KERNEL= needs MODULES=dir holding cxl/ and nvdimm/"
fi
[ -n "$kernel" ] && [ -r "$kernel" ] || skip "kernel image $kernel not readable"
echo "kernel: $kernel"

# --- the guest program, static, from the library sources ---
for lib in libnuma.a liburing.a libc.a; do
    [ -n "$(find /usr/lib /usr/lib64 -name "$lib" 2>/dev/null | head -1)" ] ||
        skip "$lib not installed (static build of the guest program)"
done
# libnuma linked in (CXLP_NUMA_LINKED: a static program loads nothing);
# xxHash from third_party/, as the library builds it
gcc -static -O2 -std=c11 -D_GNU_SOURCE -DCXLP_NUMA_LINKED -Wall -Wextra -Werror \
    -I"$src/include" -I"$src/src" -I"$src/third_party/xxhash" \
    "$src"/src/*/*.c "$src/third_party/xxhash/xxhash.c" "$here/qemu-numa-guest.c" \
    -o "$work/guest" -lnuma -luring -lpthread 2>"$work/cc.log" ||
    { cat "$work/cc.log"; fail "static build of the guest program failed"; }

# --- the initramfs ---
root=$work/initramfs
mkdir -p "$root"/bin "$root"/dev "$root"/proc "$root"/sys "$root"/tmp "$root"/modules ||
    fail "mkdir initramfs"
cp "$busybox" "$root/bin/busybox" && cp "$work/guest" "$root/bin/guest" || fail "copy into initramfs"
for a in sh mount mkdir echo cat poweroff sleep insmod hostname; do ln -s busybox "$root/bin/$a"; done
if [ "$with_cxl" = 1 ]; then
    for m in cxl/cxl_acpi cxl/cxl_pci cxl/cxl_mem nvdimm/libnvdimm cxl/cxl_pmem; do
        f=$(ls "$moddir/$m".ko* 2>/dev/null | head -1)
        [ -n "$f" ] || skip "module $m not in $moddir"
        case $f in
        *.xz) xz -dc "$f" >"$root/modules/${m#*/}.ko" || fail "xz $f" ;;
        *) cp "$f" "$root/modules/${m#*/}.ko" || fail "copy $f" ;;
        esac
    done
fi
# The kernel hands unknown name=value parameters to init as environment.
cat >"$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
# a host keeps its host id under /var/lib/cxlpool (made at the first attach)
mkdir -p /var/lib
hostname "$CXLP_GUEST"
if [ "$CXLP_GUEST" = cxl ]; then
    # order matters: the ACPI root first, then the PCI device and its memdev
    for m in cxl_acpi cxl_pci cxl_mem libnvdimm cxl_pmem; do insmod /modules/$m.ko; done
    sleep 2   # probing is asynchronous
fi
echo "GUEST-START"
/bin/guest $CXLP_GUEST
echo "GUEST-EXIT $?"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz") || fail "cpio"

# boot NAME QEMU-ARGS...: runs one guest, shows its output; status 0 when
# the guest program passed
boot() {
    local name=$1
    shift
    local start qrc elapsed log=$work/console-$name.log
    start=$(date +%s)
    timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -smp 2 \
        -nographic -no-reboot -kernel "$kernel" -initrd "$work/initrd.gz" \
        -append "console=ttyS0 quiet panic=-1 CXLP_GUEST=$name QEMU_EXPECT_LAT0=$lat0 QEMU_EXPECT_LAT1=$lat1 QEMU_EXPECT_BW1=$((bw1 * 1024))" \
        "$@" </dev/null >"$log" 2>&1
    qrc=$?
    elapsed=$(( $(date +%s) - start ))
    echo "=== guest $name"
    # the guest's own output from its start marker on, without terminal codes
    tr -d '\r' <"$log" | sed -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' |
        sed -n '/GUEST-START/,$p'
    echo "guest $name ran ${elapsed}s (qemu exit $qrc)"
    if [ $qrc -eq 124 ]; then
        tail -20 "$log"
        echo "guest $name did not power off within ${timeout_s}s"
        return 1
    fi
    grep -q 'GUEST-START' "$log" || tail -20 "$log"
    tr -d '\r' <"$log" | grep -q '^GUEST-PASS'
}

result=0
boot numa -m 2G -machine hmat=on \
    -object memory-backend-ram,size=1G,id=m0 -object memory-backend-ram,size=1G,id=m1 \
    -numa node,nodeid=0,memdev=m0,cpus=0-1 -numa node,nodeid=1,memdev=m1,initiator=0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=$lat0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw0}G \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=$lat1 \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw1}G ||
    result=1

if [ "$with_cxl" = 1 ]; then
    boot cxl -M q35,cxl=on -m 2G,maxmem=4G,slots=4 \
        -object memory-backend-file,id=cxl-mem1,share=on,mem-path="$work/cxl.raw",size=256M \
        -object memory-backend-file,id=cxl-lsa1,share=on,mem-path="$work/lsa.raw",size=256M \
        -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 \
        -device cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2 \
        -device cxl-type3,bus=root_port13,memdev=cxl-mem1,lsa=cxl-lsa1,id=cxl-pmem0 \
        -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G || result=1
fi

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
    [ $ra = 0 ] && [ $rb = 0 ] || result=1
fi

[ $result = 0 ] && { echo PASS; exit 0; }
fail "guest checks did not pass"

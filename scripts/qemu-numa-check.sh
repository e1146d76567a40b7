#!/bin/bash
# qemu-numa-check.sh - boots a real Linux kernel under QEMU (TCG) with a
# CPU-less NUMA node that carries HMAT latency and bandwidth figures, which is
# how a host with CXL memory in kmem mode looks, and runs a static test
# program inside (scripts/qemu-numa-guest.c) that calls
# cxlp_topo_discover(NULL) on the guest's live sysfs, checks the memory-only
# node and its HMAT figures, and checks that mbind places pages there.
#
# Prints PASS or FAIL and exits 0 or 1; exits 77 (skip) with a reason when
# qemu, busybox-static, a static toolchain or the Debian kernel package is
# unavailable. Needs no root: the kernel is fetched with `apt-get download`
# and unpacked with `dpkg-deb -x`.
#
# Environment:
#   KERNEL=/path/vmlinuz   use this kernel instead of fetching one
#   KEEP=1                 keep the build directory
#   QEMU_TIMEOUT=seconds   guest wall-clock limit (default 180)
#
# Build files live under /tmp: a per-run directory, and a kernel cache
# (/tmp/cxlp-qemu-kernel.$UID) so later runs skip the download.
#
# Why TCG: KVM is not usable on nested machines (the guest hangs at
# "Booting from ROM"); TCG boots this guest in seconds. Why a static program
# and busybox: the initramfs then needs no shared libraries or distribution.
set -u

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
if [ "${KEEP:-0}" = 1 ]; then
    echo "build directory: $work"
else
    trap 'rm -rf "$work"' EXIT
fi

# --- the kernel ---
kernel=${KERNEL:-}
if [ -z "$kernel" ]; then
    cache=/tmp/cxlp-qemu-kernel.$(id -u)
    kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    if [ -z "$kernel" ]; then
        command -v apt-get >/dev/null || skip "no apt-get to fetch a kernel (set KERNEL=)"
        pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
              awk '{print $1}' | sort -V | tail -1)
        [ -n "$pkg" ] || skip "no linux-image-6.1.0-*-amd64 package known to apt"
        mkdir -p "$cache.dl" || fail "mkdir $cache.dl"
        (cd "$cache.dl" && apt-get download "$pkg" >/dev/null 2>&1) ||
            skip "apt-get download $pkg failed (offline?)"
        rm -rf "$cache.tmp" && mkdir -p "$cache.tmp" &&
            dpkg-deb -x "$cache.dl"/"$pkg"_*.deb "$cache.tmp" || fail "dpkg-deb -x $pkg"
        # only the kernel image is needed: drop the modules (hundreds of MiB)
        rm -rf "$cache.tmp/lib" "$cache.dl"
        rm -rf "$cache" && mv "$cache.tmp" "$cache" || fail "cache $cache"
        kernel=$(ls "$cache"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
    fi
fi
[ -r "$kernel" ] || skip "kernel image $kernel not readable"
echo "kernel: $kernel"

# --- the guest program, static, from the library sources ---
gcc -static -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror \
    -I"$src/include" -I"$src/src" \
    "$src"/src/common/*.c "$src"/src/topo/*.c "$here/qemu-numa-guest.c" \
    -o "$work/guest" -lnuma -lxxhash -lpthread 2>"$work/cc.log" ||
    { cat "$work/cc.log"; skip "static build of the guest program failed (libnuma.a, libxxhash.a, libc.a needed)"; }

# --- the initramfs ---
root=$work/initramfs
mkdir -p "$root"/{bin,dev,proc,sys,tmp} || fail "mkdir initramfs"
cp "$busybox" "$root/bin/busybox" && cp "$work/guest" "$root/bin/guest" || fail "copy into initramfs"
for a in sh mount echo cat poweroff sleep; do ln -s busybox "$root/bin/$a"; done
cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "GUEST-START"
/bin/guest
echo "GUEST-EXIT $?"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz") || fail "cpio"

# --- boot ---
start=$(date +%s)
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2G \
    -nographic -no-reboot -kernel "$kernel" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 QEMU_EXPECT_LAT0=$lat0 QEMU_EXPECT_LAT1=$lat1 QEMU_EXPECT_BW1=$((bw1 * 1024))" \
    -machine hmat=on \
    -object memory-backend-ram,size=1G,id=m0 -object memory-backend-ram,size=1G,id=m1 \
    -numa node,nodeid=0,memdev=m0,cpus=0-1 -numa node,nodeid=1,memdev=m1,initiator=0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=$lat0 \
    -numa hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw0}G \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=$lat1 \
    -numa hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=${bw1}G \
    </dev/null >"$work/console.log" 2>&1
qrc=$?
elapsed=$(( $(date +%s) - start ))

# the guest's own output, from its start marker on
tr -d '\r' <"$work/console.log" | sed -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' |
    sed -n '/GUEST-START/,$p'
echo "guest ran ${elapsed}s (qemu exit $qrc)"
if [ $qrc -eq 124 ]; then
    tail -20 "$work/console.log"
    fail "guest did not power off within ${timeout_s}s"
fi
grep -q '^GUEST-PASS' <(tr -d '\r' <"$work/console.log") && { echo PASS; exit 0; }
grep -q 'GUEST-START' "$work/console.log" || tail -20 "$work/console.log"
fail "guest checks did not pass"

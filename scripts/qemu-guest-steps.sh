# qemu-guest-steps.sh - sourced by the init of the guests that
# scripts/qemu-numa-check.sh boots with --region and --fabric (busybox sh,
# inside the guest; not run on the host). CXLP_GUEST names the guest:
#
#   region  a CXL type-3 device (persistent memory on QEMU 7.2) gets a
#           region and a devdax namespace; a pool there; then the same
#           memory onlined as a memory-only node (kmem) and used as a tier
#   target  exports its QEMU-emulated NVMe namespace over NVMe/TCP (nvmet,
#           configfs) and waits to be killed by the script
#   fabric  connects to the target (nvme-cli) and runs the archive checks
#           on the namespace it gets (/bin/guest fabric-host)
#
# Each step is echoed and a failed one named; the last line is GUEST-PASS
# or GUEST-FAIL, which the script reads.

bad=0
step() {
    local t0 rc
    t0=$(date +%s)
    echo "+ $*"
    "$@"
    rc=$?
    [ $rc = 0 ] || { echo "STEP-FAILED ($rc): $*"; bad=1; }
    echo "  ($(( $(date +%s) - t0 )) s)"
}
verdict() {
    if [ $bad = 0 ]; then echo "GUEST-PASS"; else echo "GUEST-FAIL: a step failed"; fi
}
# The two guests' link: a QEMU socket network (UDP over the host's
# loopback), link-local addresses, nothing routed anywhere else.
TARGET_ADDR=169.254.29.1
NQN=nqn.2026-12.io.cxl-dataloader:archive
net_up() {
    ip link set lo up
    ip link set eth0 up
    ip addr add "$1/24" dev eth0
}

case $CXLP_GUEST in
region)
    step cxl list -M -D -u
    # one pmem region over the device, through the window's root decoder
    step cxl create-region -t pmem -m -d decoder0.0 -w 1 mem0
    ndregion=$(ls /sys/bus/nd/devices | grep '^region' | head -1)
    step ndctl create-namespace -m devdax -r "$ndregion"
    dax=$(ls /sys/bus/dax/devices | head -1)
    step daxctl list -u
    step /bin/guest region-devdax "/dev/$dax"
    step cxlpool verify "devdax:/dev/$dax"
    step cxlpool destroy "devdax:/dev/$dax" --yes
    step /bin/guest region-devdax-tier "/dev/$dax"
    # the same memory as a memory-only NUMA node
    step daxctl reconfigure-device --mode=system-ram "$dax"
    node=$(cat "/sys/bus/dax/devices/$dax/target_node")
    step cxlpool topo
    step /bin/guest region-kmem "$node"
    verdict
    ;;
target)
    net_up $TARGET_ADDR
    for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.2; done
    mount -t configfs none /sys/kernel/config
    s=/sys/kernel/config/nvmet/subsystems/$NQN
    p=/sys/kernel/config/nvmet/ports/1
    # fixed identifiers: a target booted again must show the initiator the
    # same namespace, or the kernel refuses it ("identifiers changed")
    step mkdir "$s"
    echo 1 >"$s/attr_allow_any_host"
    echo cxlp-archive-29 >"$s/attr_serial"
    step mkdir "$s/namespaces/1"
    echo -n /dev/nvme0n1 >"$s/namespaces/1/device_path"
    echo 2029c0de-0000-4000-8000-0000000000a1 >"$s/namespaces/1/device_uuid"
    echo 2029c0de-0000-4000-8000-0000000000a1 >"$s/namespaces/1/device_nguid"
    echo 1 >"$s/namespaces/1/enable" || bad=1
    step mkdir "$p"
    echo tcp >"$p/addr_trtype"
    echo ipv4 >"$p/addr_adrfam"
    echo $TARGET_ADDR >"$p/addr_traddr"
    echo 4420 >"$p/addr_trsvcid"
    step ln -s "$s" "$p/subsystems/$NQN"
    if [ $bad = 0 ]; then echo "TARGET-READY"; else echo "GUEST-FAIL: export"; fi
    while :; do sleep 60; done # until the script kills this guest
    ;;
fabric)
    net_up 169.254.29.2
    # the target boots at the same time: try until it listens. A lost
    # controller is retried every second for CXLP_CTRL_LOSS s (300 by
    # default: ctrl_loss_tmo), and I/O fails CXLP_FAST_IO_FAIL s (2) after
    # the loss is noticed (fast_io_fail_tmo; keep-alive 5 s) instead of
    # waiting for the controller all of ctrl_loss_tmo ("off": the kernel's
    # default, which does wait)
    for i in $(seq 120); do
        nvme connect -t tcp -a $TARGET_ADDR -s 4420 -n $NQN \
            --ctrl-loss-tmo="${CXLP_CTRL_LOSS:-300}" --reconnect-delay=1 >/dev/null 2>&1 && break
        sleep 1
    done
    ctrl=
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat "$c/transport" 2>/dev/null)" = tcp ] && ctrl=$c
    done
    if [ -z "$ctrl" ]; then
        echo "GUEST-FAIL: nvme connect to $TARGET_ADDR did not succeed"
    else
        [ "${CXLP_FAST_IO_FAIL:-2}" = off ] || echo "${CXLP_FAST_IO_FAIL:-2}" >"$ctrl/fast_io_fail_tmo"
        echo "connected: $(cat "$ctrl/subsysnqn") over $(cat "$ctrl/transport")," \
            "$(cat "$ctrl/address"); state $(cat "$ctrl/state"), keep-alive" \
            "$(cat "$ctrl/kato") s, ctrl_loss_tmo $(cat "$ctrl/ctrl_loss_tmo") s," \
            "fast_io_fail_tmo $(cat "$ctrl/fast_io_fail_tmo") s"
        step nvme list
        dev=/dev/$(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$' | head -1)
        step /bin/guest fabric-host "$dev"
        verdict
    fi
    ;;
esac

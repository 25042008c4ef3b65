#!/usr/bin/bash
# Runs in the guest after /init: runs each scenario named by `mdpilot.scenario=a,b` on the kernel
# command line (all when absent; `demo` runs /vm/demo.sh; `shell` opens a shell), prints its log
# between `@@BEGIN name` / `@@END name` on the serial console, and writes one line per scenario
#   RESULT <name> PASS|FAIL|SKIP <seconds>s [reason]
#   INFO <name> <text>
# to the results disk /dev/vda (a small raw disk the host reads back), then powers off.
# A scenario's exit status: 0 pass, 77 (or a /tmp/vm-skip file) skip, anything else fail.
export PATH=/usr/sbin:/usr/bin:/bbin
export HOME=/root LANG=C.UTF-8 TERM=${TERM:-linux} PAGER=cat SYSTEMD_PAGER=cat SYSTEMD_COLORS=0
cd /tmp || exit 1

# arg, result_line (shared with tests/debian/guest/harness.sh).
GUEST_STATE=/tmp/vm
source /vm/common.sh
uptime_s() { cut -d' ' -f1 /proc/uptime; }
boot_s=$(uptime_s)
echo "@@BOOTED $boot_s"

finish() {
    sync
    echo "@@POWEROFF"
    /bbin/poweroff -f
    sleep 10
}

list=$(arg mdpilot.scenario || true)
case $list in
    shell)
        echo "mdpilot guest shell: mdadm, mdpilot, busctl, jq; data disks are /dev/vd[b-]; exit powers off"
        setsid /bbin/cttyhack /usr/bin/bash -l
        finish
        ;;
    demo)
        /usr/bin/bash /vm/demo.sh
        finish
        ;;
esac
if [ -z "$list" ]; then
    list=$(cd /vm/scenarios && ls ./*.sh | sed 's|^\./||; s|\.sh$||' | tr '\n' ',')
fi

results=/tmp/vm-results
: >"$results"
for name in ${list//,/ }; do
    script=/vm/scenarios/$name.sh
    [ -f "$script" ] || script=$(ls /vm/scenarios/*-"$name".sh 2>/dev/null | head -1)
    if [ ! -f "$script" ]; then
        echo "RESULT $name FAIL 0s no such scenario" >>"$results"
        continue
    fi
    name=$(basename "$script" .sh)
    tmo=$(sed -n 's/^# vm-timeout: *\([0-9]*\).*/\1/p' "$script" | head -1)
    tmo=${tmo:-120}
    rm -rf /tmp/vm-skip /tmp/vm-fail /tmp/vm-info "/tmp/work"
    mkdir -p /tmp/work
    echo "@@BEGIN $name"
    t0=$(date +%s.%N)
    (cd /tmp/work && VM_SCENARIO=$name timeout -k 5 "$tmo" /usr/bin/bash -eu -o pipefail -c \
        'source /vm/lib.sh; source "$1"' scenario "$script" </dev/null 2>&1)
    rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    # A failed scenario's service log is the first thing to read.
    if [ "$rc" != 0 ] && [ -s /tmp/serve.log ]; then
        echo "--- last 40 lines of /tmp/serve.log"
        tail -n 40 /tmp/serve.log
    fi
    rm -f /tmp/serve.log
    echo "@@END $name rc=$rc"
    line=$(result_line "$rc" "$secs" "$tmo")
    echo "RESULT $name $line" >>"$results"
    [ -f /tmp/vm-info ] && sed "s/^/INFO $name /" /tmp/vm-info >>"$results"
    echo "@@RESULT $name $line"
    # Leave the next scenario a clean kernel: stray processes, arrays, limits.
    pkill -KILL -f '/usr/bin/mdpilot' 2>/dev/null
    sleep 0.2
    pkill -KILL -x busctl 2>/dev/null
    pkill -KILL -x dbus-monitor 2>/dev/null
    mdadm --stop --scan >/dev/null 2>&1
    # Fault scenarios' device-mapper devices (arrays on them are stopped above).
    DM_DISABLE_UDEV=1 dmsetup remove_all --force >/dev/null 2>&1
    rmdir /sys/fs/cgroup/slow 2>/dev/null
    # Only where there is something: opening a disk for writing makes udev re-probe it.
    for d in /dev/vd[b-z]; do
        mdadm --examine "$d" >/dev/null 2>&1 && mdadm --zero-superblock --force "$d" >/dev/null 2>&1
        [ -n "$(wipefs -n "$d" 2>/dev/null)" ] && wipefs -a -q "$d" >/dev/null 2>&1
    done
    # Durable state (journal, leases, wipe checkpoints) is each scenario's own.
    rm -rf /run/mdpilot /var/lib/mdpilot /tmp/serve.log
    udevadm settle --timeout=10
    echo 1000 >/proc/sys/dev/raid/speed_limit_min
    echo 200000 >/proc/sys/dev/raid/speed_limit_max
    # Linux 6.16+ only (the kernel's default).
    [ -e /proc/sys/dev/raid/sync_io_depth ] && echo 32 >/proc/sys/dev/raid/sync_io_depth
done
echo "END" >>"$results"
if [ -b /dev/vda ]; then
    dd if="$results" of=/dev/vda bs=64K conv=fsync status=none
fi
cat "$results"
finish

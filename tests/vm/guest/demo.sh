#!/usr/bin/bash
# The README's main demo, run in the guest by `tests/vm/demo`: a real md RAID1 resyncing, mdpilot
# serving it on the system bus, its status, the D-Bus view, the installer's policy and a wipe with
# progress. Steps whose mdpilot subcommand is not in this build yet say so and the demo goes on.
source /vm/lib.sh
set +e
B=$'\e[1m' N=$'\e[0m'
step() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }
show() { # show CMD...: prints and runs CMD; a stub's "not implemented yet" is reported, not fatal
    printf '%s$ %s%s\n' "$B" "$*" "$N"
    "$@" 2> >(tee /tmp/demo.err >&2)
    local rc=$?
    sleep 0.2
    grep -q -E 'not implemented yet|unrecognized subcommand|unexpected argument' /tmp/demo.err 2>/dev/null &&
        echo "   (not in this build of mdpilot yet)"
    return $rc
}
d0=${DISKS[0]} d1=${DISKS[1]}

step "A real md RAID1 on two 1 GiB virtio disks; the resync is throttled to 10 MB/s so it stays visible"
set_limits 1000 10000
show mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 "$d0" "$d1"
udevadm settle
sleep 2
show cat /proc/mdstat
show cat /proc/sys/dev/raid/speed_limit_min /proc/sys/dev/raid/speed_limit_max

step "mdpilot serve: the service on the system bus (org.mdpilot.MdPilot1)"
"$MDP" serve >/tmp/serve.log 2>&1 &
SERVICE_PID=$!
if wait_for 15 bus_has_name; then
    echo "service up, pid $SERVICE_PID"
else
    cat /tmp/serve.log
    echo "   (the service did not come up in this build)"
fi

step "mdpilot status"
show "$MDP" status
show "$MDP" status --json

step "The D-Bus view"
if bus_has_name; then
    show busctl --system tree "$BUS_NAME"
    show busctl --system introspect "$BUS_NAME" "$(array_path md0)" org.mdpilot.MdPilot1.Array
    "$MDP" monitor >/tmp/monitor.log 2>&1 &
    MON=$!
else
    echo "   (no service on the bus)"
fi

step "The installer's policy: resync yields to the installer's I/O (speed_limit_min 0)"
show "$MDP" policy apply --holder installer
show "$MDP" policy show
show cat /proc/sys/dev/raid/speed_limit_min

step "A wipe of the resyncing array with progress (the resync is skipped: every block is written)"
show "$MDP" wipe /dev/md0 --yes --progress json
show cat /proc/mdstat
show cat /sys/block/md0/md/sync_action /sys/block/md0/md/resync_start

step "The installer's finish step restores the admin's limits"
show "$MDP" policy restore
show cat /proc/sys/dev/raid/speed_limit_min /proc/sys/dev/raid/speed_limit_max

if [ -n "${MON:-}" ]; then
    step "What mdpilot monitor saw meanwhile"
    kill "$MON" 2>/dev/null
    head -n 30 /tmp/monitor.log
fi
[ -n "$SERVICE_PID" ] && kill -TERM "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
step "Done; powering the guest off"

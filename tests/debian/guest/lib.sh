# Helpers for tests/debian/scenarios (sourced by bash in the guest, with -eu -o pipefail), on
# top of the shared ones (common.sh: log, info, fail, skip, assert_eq, wait_for, DISKS, ...).
GUEST_STATE=/tmp/t
source "$T/common.sh"
DEB=$T/mdpilot.deb
unit_state() { systemctl is-active mdpilot.service 2>/dev/null || true; }
main_pid() { systemctl show -p MainPID --value mdpilot.service; }
# mcall METHOD SIG ARGS...: a Manager method through busctl, as root.
mcall() { local m=$1; shift; busctl --system call "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" "$m" "$@"; }
# as_tester CMD...: CMD as the unprivileged user `tester` (no session, no polkit rights).
as_tester() { runuser -u tester -- "$@"; }
name_on_bus() { busctl --system list --acquired --no-legend | awk '{print $1}' | grep -qx "$BUS_NAME"; }
# md_create NAME LEVEL DISK...: mdadm --create, metadata 1.2, small members (short syncs).
md_create() {
    local name=$1 level=$2
    shift 2
    mdadm --create "/dev/$name" --run --quiet --metadata=1.2 --level="$level" --raid-devices=$# \
        --size="${MD_SIZE:-65536}" "$@" || fail "mdadm --create /dev/$name failed"
    udevadm settle --timeout=20 || true
}
ARRAY=org.mdpilot.MdPilot1.Array
JOB=org.mdpilot.MdPilot1.Job
# array_path mdN: the Array object's path (API 1.0: keyed by the array UUID's 32 hex digits).
array_path() { echo "$BUS_PATH/arrays/$(tr -d -- '-:\n' <"/sys/block/$1/md/uuid" | tr 'A-F' 'a-f')"; }
# aprop mdN PROPERTY: an Array property as busctl prints it (`t 0`, `s "raid1"`).
aprop() { busctl --system get-property "$BUS_NAME" "$(array_path "$1")" "$ARRAY" "$2"; }
# jprop JOBPATH PROPERTY: a Job property as busctl prints it.
jprop() { busctl --system get-property "$BUS_NAME" "$1" "$JOB" "$2"; }
# restart_unit: systemctl restart, then wait until the name is back on the bus.
restart_unit() {
    systemctl restart mdpilot.service || { systemctl status mdpilot.service --no-pager || true; fail "systemctl restart failed"; }
    wait_for 20 name_on_bus || fail "$BUS_NAME not on the bus after the restart"
}
# unit_journal: the records of the unit's current main process, one JSON object a line.
unit_journal() {
    journalctl --sync 2>/dev/null || true
    journalctl _SYSTEMD_UNIT=mdpilot.service _PID="$(main_pid)" --no-pager -o json
}
# idle mdN: md/sync_action is idle (no resync, recovery or check runs).
idle() { [ "$(cat "/sys/block/$1/md/sync_action")" = idle ]; }
# sync_writers MD: four synchronous 4 KiB writers near MD's end, each stalled on io most of the
# time (io pressure `some` far above any throttle's band); their pids in WRITERS.
# stop_writers ends them (safe to call twice, and from a trap).
WRITERS=()
sync_writers() {
    local end_kib i
    end_kib=$(($(blockdev --getsz "/dev/$1") / 2 - 65536))
    for i in 1 2 3 4; do
        dd if=/dev/zero of="/dev/$1" bs=4k count=100000 seek=$(((end_kib + i * 8192) / 4)) oflag=direct,dsync status=none 2>/dev/null &
        WRITERS+=("$!")
    done
}
stop_writers() {
    [ "${#WRITERS[@]}" = 0 ] || kill "${WRITERS[@]}" 2>/dev/null || true
    wait "${WRITERS[@]}" 2>/dev/null || true
    WRITERS=()
}
# drop_array MD DISK...: stops MD, if it is there, and zeroes its members' superblocks.
drop_array() {
    local md=$1
    shift
    [ -e "/dev/$md" ] || return 0
    echo idle >"/sys/block/$md/md/sync_action" 2>/dev/null || true
    mdadm --stop "/dev/$md" >/dev/null 2>&1 || true
    mdadm --zero-superblock "$@" 2>/dev/null || true
}

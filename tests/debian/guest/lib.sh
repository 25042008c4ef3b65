# Helpers for tests/debian/scenarios (sourced by bash in the guest, with -eu -o pipefail).
# Data disks: DISKS=(/dev/vdb /dev/vdc ...); /dev/vda is the results disk, never touched here.
# `fail MSG` (exit 1), `skip MSG` (exit 77), `info MSG` (a figure the host runner prints).
BUS_NAME=org.mdpilot.MdPilot1
BUS_PATH=/org/mdpilot/MdPilot1
# API v1: the Manager is its own object under the ObjectManager root.
MANAGER_PATH=$BUS_PATH/Manager
MANAGER=org.mdpilot.MdPilot1.Manager
DEB=$T/mdpilot.deb
mapfile -t DISKS < <(ls /dev/vd[b-z] 2>/dev/null)

log() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }
info() { echo "@@INFO $*"; echo "$*" >>/tmp/t-info; }
fail() { echo "FAIL: $*"; [ -s /tmp/t-fail ] || echo "$*" >/tmp/t-fail; exit 1; }
skip() { echo "SKIP: $*"; [ -s /tmp/t-skip ] || echo "$*" >/tmp/t-skip; exit 77; }
need_disks() { [ "${#DISKS[@]}" -ge "$1" ] || fail "needs $1 data disks, the guest has ${#DISKS[@]}"; }
assert_eq() { [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"; log "ok: $3 = $2"; }
assert() { "$@" || fail "assertion failed: $*"; }
# wait_for SECONDS CMD...: polls CMD every 0.1 s until it succeeds; 1 on timeout.
wait_for() {
    local end=$(($(date +%s%N) + $1 * 1000000000))
    shift
    until "$@"; do
        [ "$(date +%s%N)" -lt "$end" ] || return 1
        sleep 0.1
    done
}
limit_min() { cat /proc/sys/dev/raid/speed_limit_min; }
limit_max() { cat /proc/sys/dev/raid/speed_limit_max; }
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

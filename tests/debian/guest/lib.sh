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

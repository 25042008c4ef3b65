# What both guest harnesses share (the qemu test bed of tests/vm and the booted Debian of
# tests/debian): tests/vm/build and tests/debian/build copy this file into the guest next to
# the harness and lib.sh. The harness sources it for `arg` and `result_line`; each lib.sh sources
# it first for the scenario helpers, then adds its own.
#
# GUEST_STATE (set before sourcing): the prefix of the per-scenario files the harness reads back
# after each scenario: $GUEST_STATE-skip, -fail, -info (/tmp/vm in the VM, /tmp/t in Debian).
# Data disks: DISKS=(/dev/vdb /dev/vdc ...); /dev/vda is the results disk, never touched here.
# `fail MSG` (exit 1), `skip MSG` (exit 77; also from a subshell, via the skip file),
# `info MSG` (a figure the host runner prints).
: "${GUEST_STATE:?set GUEST_STATE before sourcing common.sh}"

BUS_NAME=org.mdpilot.MdPilot1
BUS_PATH=/org/mdpilot/MdPilot1
# API v1: the Manager is its own object under the ObjectManager root.
MANAGER_PATH=$BUS_PATH/Manager
MANAGER=org.mdpilot.MdPilot1.Manager
mapfile -t DISKS < <(ls /dev/vd[b-z] 2>/dev/null)

# arg KEY: the value of KEY=... on the kernel command line; 1 when absent.
arg() {
    local w
    for w in $(cat /proc/cmdline); do
        case $w in "$1="*) echo "${w#*=}"; return 0 ;; esac
    done
    return 1
}

log() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }
info() { echo "@@INFO $*"; echo "$*" >>"$GUEST_STATE-info"; }
fail() { echo "FAIL: $*"; [ -s "$GUEST_STATE-fail" ] || echo "$*" >"$GUEST_STATE-fail"; exit 1; }
skip() { echo "SKIP: $*"; [ -s "$GUEST_STATE-skip" ] || echo "$*" >"$GUEST_STATE-skip"; exit 77; }
need_disks() { [ "${#DISKS[@]}" -ge "$1" ] || fail "needs $1 data disks, the guest has ${#DISKS[@]}"; }

# assert_eq ACTUAL EXPECTED WHAT
assert_eq() { [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"; log "ok: $3 = $2"; }
# assert CMD...: the command succeeds
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

# result_line RC SECONDS TIMEOUT: the harness's verdict on a scenario that exited with RC,
# `PASS|FAIL|SKIP <seconds>s [reason]`, from its exit status and the skip and fail files.
result_line() {
    local rc=$1 secs=$2 tmo=$3
    if [ -s "$GUEST_STATE-skip" ]; then
        echo "SKIP ${secs}s $(head -1 "$GUEST_STATE-skip")"
    elif [ "$rc" = 0 ]; then
        echo "PASS ${secs}s"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "FAIL ${secs}s timed out after ${tmo}s"
    elif [ -s "$GUEST_STATE-fail" ]; then
        echo "FAIL ${secs}s $(head -1 "$GUEST_STATE-fail")"
    else
        echo "FAIL ${secs}s exited with status $rc"
    fi
}

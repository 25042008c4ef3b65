# Helpers for the scenarios in tests/vm/scenarios (sourced by bash in the guest, with -eu -o pipefail),
# on top of the shared ones (common.sh: log, info, fail, skip, assert_eq, wait_for, DISKS, ...).
# `mdp ARGS` (mdpilot, skipping the scenario when the subcommand is still a stub that says
# "not implemented yet").
GUEST_STATE=/tmp/vm
source /vm/common.sh

MDP=/usr/bin/mdpilot

# kernel_at_least MAJOR.MINOR: the guest's kernel is that release or newer (the bed's kernel,
# tests/vm/run --kernel), for scenarios whose kernel behaviour changed.
kernel_at_least() {
    local want=$1 have
    have=$(uname -r | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
    [ "$(printf '%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ]
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

md_attr() { cat "/sys/block/$1/md/$2"; }           # md_attr md0 sync_action
md_set() { echo "$3" >"/sys/block/$1/md/$2"; }     # md_set md0 sync_action idle
set_limits() { echo "$1" >/proc/sys/dev/raid/speed_limit_min; echo "$2" >/proc/sys/dev/raid/speed_limit_max; }
sync_is() { [ "$(md_attr "$1" sync_action)" = "$2" ]; }

# md_create NAME LEVEL DISK... : mdadm --create with metadata 1.2, no questions, waits for udev.
# MD_SIZE (e.g. 512M) limits the space used on each member: shorter syncs under TCG.
md_create() {
    local name=$1 level=$2
    shift 2
    local n=0 d
    for d in "$@"; do n=$((n + 1)); done
    mdadm --create "/dev/$name" --run --quiet --metadata=1.2 --level="$level" --raid-devices="$n" \
        ${MD_SIZE:+--size="$MD_SIZE"} "$@" || fail "mdadm --create /dev/$name failed"
    udevadm settle --timeout=20 2>/dev/null || true
}

# sync_done_kib MD: KiB done of the running sync, from /proc/mdstat's `(done/total)` (sysfs
# sync_completed only moves in steps of 1/16 of the device).
sync_done_kib() {
    awk -v md="$1" '$1 == md {f = 1; next} f && /\(([0-9]+)\/[0-9]+\)/ {
        match($0, /\([0-9]+\//); print substr($0, RSTART + 1, RLENGTH - 2); exit} f && /^$/ {exit}' /proc/mdstat
}
# sync_rate_mbs MD SECONDS: MB/s of the running sync over SECONDS (1 decimal; n/a when none runs).
sync_rate_mbs() {
    local a b
    a=$(sync_done_kib "$1")
    sleep "$2"
    b=$(sync_done_kib "$1")
    case "$a$b" in '' | *[!0-9]*) echo "n/a"; return ;; esac
    awk -v a="$a" -v b="$b" -v s="$2" 'BEGIN{printf "%.1f", (b-a)*1024/s/1e6}'
}

# mdp ARGS...: runs mdpilot; its stderr is shown; a stub ("not implemented yet") skips the scenario.
mdp() {
    local err rc=0
    err=$(mktemp)
    "$MDP" "$@" 2>"$err" || rc=$?
    cat "$err" >&2
    if grep -q 'not implemented yet' "$err"; then
        skip "mdpilot $(grep -m1 'not implemented yet' "$err" | sed 's/^mdpilot: //')"
    fi
    rm -f "$err"
    return $rc
}

# run_mdp OUTFILE ARGS...: mdpilot with stdout and stderr into OUTFILE (also shown); exit status in
# MDP_RC (never fails the script by itself); a stub skips the scenario.
MDP_RC=0
run_mdp() {
    local out=$1
    shift
    MDP_RC=0
    # stdout alone goes to $out (JSON must stay parseable); stderr (logs) to $out.err.
    "$MDP" "$@" >"$out" 2>"$out.err" </dev/null || MDP_RC=$?
    local f
    for f in "$out" "$out.err"; do
        # Progress output can be long: the start and the end are what a failure needs.
        if [ "$(wc -l <"$f")" -gt 30 ]; then
            head -n 10 "$f"
            echo "... ($(wc -l <"$f") lines)"
            tail -n 10 "$f"
        else
            cat "$f"
        fi
    done
    if grep -q 'not implemented yet' "$out" "$out.err"; then
        skip "mdpilot $(grep -h -m1 'not implemented yet' "$out" "$out.err" | sed 's/^mdpilot: //')"
    fi
    return 0
}

# require FEATURE...: skips the scenario unless each mdpilot subcommand is implemented. The probes
# are harmless once implemented (no bus to reach, a device that does not exist).
require() {
    local f out
    mkdir -p /tmp/probe-root
    for f in "$@"; do
        case $f in
            status) out=$("$MDP" --root /tmp/probe-root status 2>&1) ;;
            policy) out=$("$MDP" --root /tmp/probe-root policy show 2>&1) ;;
            wipe) out=$("$MDP" wipe /dev/mdpilot-probe-nonexistent 2>&1) ;;
            blockdev-wipe) out=$("$MDP" blockdev-wipe /dev/mdpilot-probe-nonexistent 2>&1) ;;
            serve) out=$(DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent timeout 5 "$MDP" --root /tmp/probe-root serve 2>&1) ;;
            monitor) out=$(DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent timeout 5 "$MDP" monitor 2>&1) ;;
            *) fail "require: unknown feature $f" ;;
        esac </dev/null || true
        if grep -q 'not implemented yet' <<<"$out"; then
            skip "mdpilot $f: not implemented yet"
        fi
    done
}

# ---- D-Bus
bus_has_name() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner "string:${1:-$BUS_NAME}" 2>/dev/null | grep -q 'boolean true'
}
# name_owner_pid: the pid of the process that owns $BUS_NAME (empty when none does).
name_owner_pid() {
    dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.GetConnectionUnixProcessID "string:$BUS_NAME" 2>/dev/null |
        awk '/uint32/ {print $2}' || true
}
# start_service [ARGS]: `mdpilot serve` on the system bus; waits until it owns the name (this
# process, not another: one a failed scenario left behind is stopped first).
SERVICE_PID=
start_service() {
    local stale
    stale=$(name_owner_pid)
    if [ -n "$stale" ]; then
        log "stopping pid $stale, which holds $BUS_NAME before the service starts"
        kill -KILL "$stale" 2>/dev/null || true
        wait_for 10 sh -c '! dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner "string:$0" | grep -q "boolean true"' "$BUS_NAME" ||
            fail "$BUS_NAME still owned after stopping pid $stale"
    fi
    "$MDP" -v serve "$@" >>/tmp/serve.log 2>&1 &
    SERVICE_PID=$!
    ours() { [ "$(name_owner_pid)" = "$SERVICE_PID" ]; }
    if ! wait_for 30 ours; then
        cat /tmp/serve.log
        grep -q 'not implemented yet' /tmp/serve.log && skip "mdpilot serve: not implemented yet"
        fail "mdpilot serve did not own $BUS_NAME within 30 s"
    fi
    log "service up (pid $SERVICE_PID)"
}
stop_service() {
    [ -n "$SERVICE_PID" ] || return 0
    kill -TERM "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
    SERVICE_PID=
}
# bus_prop OBJECT_PATH INTERFACE PROPERTY: the value as compact JSON (busctl --json).
bus_prop() {
    busctl --system --json=short get-property "$BUS_NAME" "$1" "$2" "$3" | jq -c '.data'
}
# array_path md0: the object path, keyed by the array UUID's 32 hex digits (API 1.0).
array_path() {
    local hex
    hex=$(tr -d -- '-:\n' <"/sys/block/$1/md/uuid" 2>/dev/null | tr 'A-F' 'a-f')
    # An all-zero UUID (an inactive array's md/uuid) is no UUID, as in dbus::array_path.
    if [ "${#hex}" -eq 32 ] && [ -n "${hex//0/}" ]; then echo "$BUS_PATH/arrays/$hex"; else echo "$BUS_PATH/arrays/name_$1"; fi
}
array_prop() { bus_prop "$(array_path "$1")" org.mdpilot.MdPilot1.Array "$2"; }
manager_prop() { bus_prop "$MANAGER_PATH" org.mdpilot.MdPilot1.Manager "$1"; }
# bus_call PATH INTERFACE METHOD SIGNATURE ARGS...: busctl call, JSON reply.
bus_call() {
    local p=$1 i=$2 m=$3
    shift 3
    busctl --system --json=short call "$BUS_NAME" "$p" "$i" "$m" "$@"
}

# ---- slow devices
# throttle DEV BYTES_PER_S: writes to DEV from processes started with `throttled` are limited by
# blk-throttle (cgroup v2 io.max), e.g. so that a wipe is still running when a scenario cancels it.
throttle() {
    local dev
    dev=$(cat "/sys/class/block/$(basename "$1")/dev")
    grep -qw io /sys/fs/cgroup/cgroup.subtree_control || echo +io >/sys/fs/cgroup/cgroup.subtree_control
    mkdir -p /sys/fs/cgroup/slow
    echo "$dev wbps=$2" >/sys/fs/cgroup/slow/io.max
}
throttled() { bash -c 'echo $$ >/sys/fs/cgroup/slow/cgroup.procs && exec "$@"' throttled "$@"; }
# throttled_bg OUT ERR CMD...: CMD in the background, throttled, stdout/stderr to files;
# THROTTLED_PID is CMD's own pid (the wrapper execs), so signals reach CMD itself.
THROTTLED_PID=
throttled_bg() {
    local out=$1 err=$2
    shift 2
    bash -c 'echo $$ >/sys/fs/cgroup/slow/cgroup.procs && exec "$@"' throttled "$@" >"$out" 2>"$err" </dev/null &
    THROTTLED_PID=$!
}

# Zero checks sample the device: reading a whole GiB back through user space takes minutes under
# TCG (every byte crosses emulated SIMD code), while dd O_DIRECT alone runs at disk speed.
# dirty DEV [STEP_MIB [FIRST_MIB]]: 1 MiB of random data at FIRST_MIB (default 0), then every
# STEP_MIB (default 64) MiB, and in the last MiB when FIRST_MIB is 0, so a wipe that skips a region,
# or writes only one mirror, shows up. On a member, start past the superblock and data offset.
dirty() {
    local dev=$1 step=${2:-64} first=${3:-0} mib off
    mib=$(($(blockdev --getsize64 "$dev") >> 20))
    for ((off = first; off < mib - 1; off += step)); do
        dd if=/dev/urandom of="$dev" bs=1M count=1 seek="$off" oflag=direct status=none
    done
    [ "$first" != 0 ] || dd if=/dev/urandom of="$dev" bs=1M count=1 seek=$((mib - 1)) oflag=direct status=none
}
# is_zero DEV [STEP_MIB]: the 1 MiB blocks `dirty` wrote (and the last MiB) read back as zeros,
# bypassing the page cache. 1 at the first non-zero block, whose offset it prints.
is_zero() {
    local dev=$1 step=${2:-64} mib off
    mib=$(($(blockdev --getsize64 "$dev") >> 20))
    for off in $(seq 0 "$step" $((mib - 1))) $((mib - 1)); do
        dd if="$dev" of=/tmp/block bs=1M count=1 skip="$off" iflag=direct status=none
        cmp -s -n 1048576 /tmp/block /dev/zero || { echo "$dev: MiB $off is not zero"; return 1; }
    done
}

# timed CMD...: runs CMD, sets ELAPSED_MS and TIMED_RC (does not fail the script).
ELAPSED_MS=0
TIMED_RC=0
timed() {
    local t0
    t0=$(now_ms)
    TIMED_RC=0
    "$@" || TIMED_RC=$?
    ELAPSED_MS=$(($(now_ms) - t0))
}
# mbs BYTES MS: MB/s with one decimal.
mbs() { awk -v b="$1" -v ms="$2" 'BEGIN{ if (ms <= 0) ms = 1; printf "%.1f", b / 1e6 / (ms / 1000) }'; }

# ---- faults (device-mapper)
# libdevmapper without udev: the guest has no dm udev rules, so dmsetup would wait for a udev
# cookie forever; without udev it makes /dev/mapper/NAME itself.
export DM_DISABLE_UDEV=1
# dm_create NAME TABLE: a device-mapper device from a table text (lines `start len target args`,
# 512-byte sectors); prints nothing; fails the scenario when dmsetup does.
dm_create() {
    printf '%s\n' "$2" | dmsetup create "$1" || fail "dmsetup create $1 failed"
    [ -b "/dev/mapper/$1" ] || fail "/dev/mapper/$1 did not appear"
}
# dm_replace NAME TABLE: load TABLE and switch to it (suspend, resume), as a dying disk would.
dm_replace() {
    printf '%s\n' "$2" | dmsetup load "$1" || fail "dmsetup load $1 failed"
    dmsetup suspend --noflush "$1" || fail "dmsetup suspend $1 failed"
    dmsetup resume "$1" || fail "dmsetup resume $1 failed"
}
# dm_remove_all: removes every dm device (ignores errors); for the end of a fault scenario.
dm_remove_all() { dmsetup remove_all --force >/dev/null 2>&1 || true; }
sectors() { blockdev --getsz "$1"; } # size in 512-byte sectors
# no_leftovers WHAT MIN MAX: nothing of a job is left behind: the global limits are MIN/MAX, no lease
# is in the state file, and no array's sync_action is `frozen`.
no_leftovers() {
    local what=$1 md
    assert_eq "$(limit_min)" "$2" "speed_limit_min ($what)"
    assert_eq "$(limit_max)" "$3" "speed_limit_max ($what)"
    "$MDP" policy show --json >/tmp/show.json 2>/tmp/show.err || { cat /tmp/show.err; fail "policy show failed ($what)"; }
    assert_eq "$(jq '.leases | length' /tmp/show.json)" 0 "leases in the state file ($what)"
    for md in /sys/block/md*/md; do
        [ -e "$md/sync_action" ] || continue
        [ "$(cat "$md/sync_action")" != frozen ] || fail "$(basename "$(dirname "$md")") sync_action is frozen ($what)"
    done
    log "ok: nothing left behind ($what)"
}

# ---- installer
# crypto_wipe BLOCKDEV_WIPE DEV: partman-crypto's crypto_wipe_device progress loop (d-i):
# `BLOCKDEV_WIPE -s 65536 DEV` writes one `*` per 1/1000 of DEV into a fifo that is read line by
# line. Sets WIPE_RC (exit status), WIPE_STARS and WIPE_OTHER (lines that are not `*`); its
# stderr is left in /tmp/bw.err.
crypto_wipe() {
    local fifo=/tmp/wipe.fifo x pid
    rm -f "$fifo"
    mkfifo "$fifo"
    "$1" -s 65536 "$2" >"$fifo" 2>/tmp/bw.err &
    pid=$!
    WIPE_STARS=0 WIPE_OTHER=0
    while read -r x <&9; do
        if [ "$x" = "*" ]; then WIPE_STARS=$((WIPE_STARS + 1)); else WIPE_OTHER=$((WIPE_OTHER + 1)); fi
    done 9<"$fifo"
    WIPE_RC=0
    wait "$pid" || WIPE_RC=$?
    cat /tmp/bw.err
}

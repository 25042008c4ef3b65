# vm-timeout: 240
# A wipe target that disappears mid-job: the dm table under a running wipe is replaced
# by `error` (dmsetup load/suspend/resume, as a dying disk does), then, in a second run, the device
# is removed outright (dmsetup remove --force). Each time the wipe fails cleanly: exit 1, a message
# naming the device with the offset and errno, no panic, nothing left behind.
need_disks 1
require wipe
ORIG_MIN=1000
ORIG_MAX=10000
set_limits "$ORIG_MIN" "$ORIG_MAX"
size=$(sectors "${DISKS[0]}")
for how in error-table remove; do
    dm_create vanish "0 $size linear ${DISKS[0]} 0"
    # The kernel name (dm-N) for blk-throttle: /dev/mapper/vanish is a node of its own here.
    kdev=/dev/$(basename "$(readlink -f "/sys/dev/block/$((0x$(stat -c %t /dev/mapper/vanish))):$((0x$(stat -c %T /dev/mapper/vanish)))")")
    throttle "$kdev" 25000000
    # --restart: the first round leaves a checkpoint of its interrupted wipe (by design).
    throttled_bg /tmp/w.jsonl /tmp/w.err "$MDP" wipe /dev/mapper/vanish --yes --restart --method random --progress json
    wpid=$THROTTLED_PID
    progressed() { [ "$(grep -c '"progress"' /tmp/w.jsonl)" -ge 2 ]; }
    wait_for 60 progressed || { cat /tmp/w.err; fail "no progress from the throttled wipe ($how)"; }
    case $how in
        error-table) dm_replace vanish "0 $size error" ;;
        # Still open: --force swaps in the error target and the removal itself may fail (busy).
        remove) dmsetup remove --force vanish || log "dmsetup remove: still open, table is now error" ;;
    esac
    gone() { ! kill -0 "$wpid" 2>/dev/null; }
    wait_for 90 gone || { kill -KILL "$wpid"; fail "the wipe did not end within 90 s after its device vanished ($how)"; }
    rc=0
    wait "$wpid" || rc=$?
    cat /tmp/w.err
    grep -q 'panicked' /tmp/w.err && fail "mdpilot panicked ($how)"
    assert_eq "$rc" 1 "wipe exit status after the device vanished ($how)"
    grep -q 'vanish\|dm-' /tmp/w.err || fail "the error does not name the device ($how)"
    msg=$(grep -o 'failed at offset [0-9]* bytes (errno [0-9]*)' /tmp/w.err | head -1 || true)
    [ -n "$msg" ] || fail "no 'failed at offset N bytes (errno E)' on stderr ($how)"
    no_leftovers "after the device vanished ($how)" "$ORIG_MIN" "$ORIG_MAX"
    info "wipe target vanished ($how): exit $rc, '$msg'"
    dm_remove_all
done

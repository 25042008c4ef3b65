# vm-timeout: 300
# A member failed (`mdadm --fail`) and removed during a wipe of the array: the wipe
# finishes or fails cleanly (exit 0 or 1, a message on failure, no panic), and afterwards md0's
# sync_action is not `frozen`, the limits are the originals and no lease is left. On success the
# wipe (random data, --verify) read the whole array back and compared it.
need_disks 3
require wipe
ORIG_MIN=1000
ORIG_MAX=10000
MD_SIZE=512M
set_limits "$ORIG_MIN" "$ORIG_MAX"
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}" "${DISKS[2]}"
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
dirty /dev/md0 64
throttle /dev/md0 25000000
# Random data through md0: a zero wipe is offloaded to the members and ends before the fault.
throttled_bg /tmp/w.jsonl /tmp/w.err "$MDP" wipe /dev/md0 --yes --method random --verify --progress json
wpid=$THROTTLED_PID
progressed() { [ "$(grep -c '"progress"' /tmp/w.jsonl)" -ge 2 ]; }
wait_for 60 progressed || { cat /tmp/w.err; fail "no progress from the throttled wipe"; }
log "during the wipe: sync_action $(md_attr md0 sync_action)"
mdadm /dev/md0 --fail "${DISKS[2]}" || fail "mdadm --fail ${DISKS[2]} failed"
sleep 1
mdadm /dev/md0 --remove "${DISKS[2]}" || fail "mdadm --remove ${DISKS[2]} failed"
cat /proc/mdstat
gone() { ! kill -0 "$wpid" 2>/dev/null; }
wait_for 120 gone || { kill -KILL "$wpid"; fail "the wipe did not end within 120 s after the member was removed"; }
rc=0
wait "$wpid" || rc=$?
cat /tmp/w.err
tail -2 /tmp/w.jsonl
grep -q 'panicked' /tmp/w.err && fail "mdpilot panicked"
case $rc in
    0) outcome="finished" ;;
    1)
        outcome="failed: $(tail -1 /tmp/w.err)"
        [ -s /tmp/w.err ] || fail "the wipe failed without a message"
        ;;
    *) fail "wipe exit status $rc (want 0 or 1)" ;;
esac
sleep 1
state=$(md_attr md0 sync_action)
[ "$state" != frozen ] || fail "md0 sync_action left frozen after the member was removed during the wipe"
no_leftovers "after the wipe with a member removed" "$ORIG_MIN" "$ORIG_MAX"
if [ "$rc" = 0 ]; then
    # --verify: the job read everything back through md0 and compared it.
    tail -1 /tmp/w.jsonl | jq -e '.outcome.verified == true' >/dev/null ||
        fail "a wipe that reported success did not verify: $(tail -1 /tmp/w.jsonl)"
else
    [ "$(md_attr md0 resync_start)" != none ] || fail "resync_start is none after a wipe that failed"
fi
info "member failed and removed mid-wipe: wipe $outcome (exit $rc); sync_action afterwards $state"

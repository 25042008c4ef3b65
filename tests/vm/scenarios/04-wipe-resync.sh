# vm-timeout: 300
# Wipe during the initial resync: the array reads back as zeros (sampled: every block dirtied before), the resync is skipped, and a
# `check` afterwards reports mismatch_cnt 0. The same wipe cancelled half-way: the resync resumes
# from its checkpoint and completes.
need_disks 2
require wipe
MD_SIZE=512M # a 512 MiB array: the check and the resumed resync stay short under TCG
set_limits 1000 10000 # the resync would take ~50 s: it is still running when the wipe starts
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
size=$(blockdev --getsize64 /dev/md0)
# Random blocks through the array and, at other offsets, on one member only (data offset aside),
# so a region the wipe skipped, or a mirror it did not write, shows up.
dirty /dev/md0 64
dirty "${DISKS[1]}" 96 200

run_mdp /tmp/wipe.jsonl wipe /dev/md0 --yes --progress json
assert_eq "$MDP_RC" 0 "mdpilot wipe /dev/md0 exit status"
tail -1 /tmp/wipe.jsonl | jq -e . >/dev/null || fail "last progress line is not JSON: $(tail -1 /tmp/wipe.jsonl)"
assert_eq "$(md_attr md0 sync_action)" idle "md0 sync_action right after the wipe (resync skipped)"
assert_eq "$(md_attr md0 resync_start)" none "md0 resync_start after the wipe"
grep -q 'resync' /proc/mdstat && fail "/proc/mdstat still shows a resync after the wipe"
echo 3 >/proc/sys/vm/drop_caches
is_zero /dev/md0 32 || fail "md0 does not read back as zeros"
log "ok: md0 reads back as zeros (1 MiB every 32 MiB, every block dirtied before)"
set_limits 1000 2000000
md_set md0 sync_action check
wait_for 5 sync_is md0 check || true
wait_for 200 sync_is md0 idle || fail "check did not finish"
assert_eq "$(md_attr md0 mismatch_cnt)" 0 "mismatch_cnt after check"

# Cancelled half-way: writes to md0 from the wipe are throttled to 25 MB/s so it is still running.
mdadm --stop /dev/md0 >/dev/null
mdadm --zero-superblock "${DISKS[0]}" "${DISKS[1]}"
set_limits 1000 10000
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "new md0 is not resyncing"
# Member offload zeroes the members directly: they are throttled as well (one io.max line each).
throttle /dev/md0 25000000
throttle "${DISKS[0]}" 25000000
throttle "${DISKS[1]}" 25000000
throttled_bg /tmp/wipe2.jsonl /tmp/wipe2.err "$MDP" wipe /dev/md0 --yes --progress json
wpid=$THROTTLED_PID
progressed() { [ "$(wc -l </tmp/wipe2.jsonl)" -ge 3 ]; }
wait_for 30 progressed || { cat /tmp/wipe2.err; fail "no progress from the throttled wipe"; }
frozen=$(md_attr md0 sync_action)
log "sync_action during the wipe: $frozen"
# SIGTERM: background jobs of a non-interactive shell start with SIGINT ignored.
kill -TERM "$wpid"
rc=0
wait "$wpid" || rc=$?
cat /tmp/wipe2.err
tail -2 /tmp/wipe2.jsonl
[ "$rc" != 0 ] || fail "a cancelled wipe exited 0"
done_at=$(md_attr md0 sync_completed)
log "after cancel: sync_action $(md_attr md0 sync_action), sync_completed $done_at"
set_limits 1000 2000000
wait_for 10 sync_is md0 resync || fail "resync did not resume after the cancelled wipe (sync_action $(md_attr md0 sync_action))"
wait_for 120 sync_is md0 idle || fail "resumed resync did not complete"
assert_eq "$(md_attr md0 resync_start)" none "resync_start after the resumed resync"
info "cancelled wipe: resync resumed and completed (sync_action during wipe: $frozen)"

# vm-timeout: 900
# Freezes are journaled in the policy state: SIGKILL of `mdpilot wipe` at
# 4 random moments (SIGKILL_RUNS; each CI run draws new ones) of a freeze-and-skip wipe (a whole-array random wipe of a fresh raid1 during its
# initial resync; random, because a zero wipe is offloaded to the members and ends in 0.1 s), each followed by `mdpilot policy restore`. Checked per run:
#   - md0 sync_action is not `frozen` after the restore;
#   - the resync resumes and completes (resync_start `none` at the end);
#   - resync_start was never `none` while the wipe was incomplete (sampled every 50 ms);
#   - the global limits and md0's per-array limits are the originals.
# Prints the tally `N/RUNS`; passes only at N = RUNS. A run left frozen (a regression) is unfrozen by
# hand (echo idle) so the next run starts clean.
need_disks 2
require wipe policy
ORIG_MIN=1000
ORIG_MAX=10000
RUNS=${SIGKILL_RUNS:-4}
MD_SIZE=256M
ok=0
problems=()
for run in $(seq 1 "$RUNS"); do
    set_limits "$ORIG_MIN" "$ORIG_MAX"
    md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
    wait_for 10 sync_is md0 resync || fail "run $run: md0 is not resyncing"
    pmin=$(md_attr md0 sync_speed_min)
    pmax=$(md_attr md0 sync_speed_max)
    # 256 MiB at 40 MB/s: about 7 s of writing, so the kill lands before, during or after the freeze.
    throttle /dev/md0 40000000
    : >/tmp/samples
    (while :; do echo "$(cat /sys/block/md0/md/resync_start) $(cat /sys/block/md0/md/sync_action)"; sleep 0.05; done >>/tmp/samples 2>/dev/null) &
    sampler=$!
    # Random data through md0: a zero wipe is offloaded to the members and ends before any kill.
    throttled_bg /tmp/w.jsonl /tmp/w.err "$MDP" wipe /dev/md0 --yes --method random --progress json
    wpid=$THROTTLED_PID
    delay_ms=$((RANDOM % 7000))
    sleep "$(awk -v m="$delay_ms" 'BEGIN{printf "%.3f", m/1000}')"
    at_kill=$(md_attr md0 sync_action)
    kill -KILL "$wpid" 2>/dev/null || true
    wait "$wpid" 2>/dev/null || true
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    complete=0
    jq -e 'select(.event == "completed" and .success == true)' /tmp/w.jsonl >/dev/null 2>&1 && complete=1
    last=$(grep '"progress"' /tmp/w.jsonl | tail -1 | jq -r '"\(.done_bytes)/\(.total_bytes)"' 2>/dev/null || echo "?")
    run_mdp /tmp/restore.out policy restore
    sleep 1
    bad=()
    [ "$MDP_RC" = 0 ] || bad+=("policy restore exit $MDP_RC")
    after=$(md_attr md0 sync_action)
    [ "$after" != frozen ] || bad+=("sync_action frozen after restore")
    if [ "$complete" = 0 ] && grep -q '^none ' /tmp/samples; then
        bad+=("resync_start was none while the wipe was incomplete")
    fi
    [ "$(limit_min)" = "$ORIG_MIN" ] || bad+=("speed_limit_min $(limit_min), want $ORIG_MIN")
    [ "$(limit_max)" = "$ORIG_MAX" ] || bad+=("speed_limit_max $(limit_max), want $ORIG_MAX")
    [ "$(md_attr md0 sync_speed_min)" = "$pmin" ] || bad+=("md0 sync_speed_min '$(md_attr md0 sync_speed_min)', want '$pmin'")
    [ "$(md_attr md0 sync_speed_max)" = "$pmax" ] || bad+=("md0 sync_speed_max '$(md_attr md0 sync_speed_max)', want '$pmax'")
    # Unfreeze by hand (what the journal should do) so the resync check below means something
    # for the other conditions and the next run starts clean.
    [ "$after" != frozen ] || md_set md0 sync_action idle
    set_limits "$ORIG_MIN" 2000000
    if [ "$(md_attr md0 resync_start)" != none ]; then
        wait_for 5 sh -c '! grep -qx "idle\|frozen" /sys/block/md0/md/sync_action' || true
        wait_for 120 sync_is md0 idle || bad+=("resync did not complete (sync_action $(md_attr md0 sync_action))")
    fi
    [ "$(md_attr md0 resync_start)" = none ] || bad+=("resync_start $(md_attr md0 resync_start) at the end")
    if [ "${#bad[@]}" = 0 ]; then
        ok=$((ok + 1))
        log "run $run: ok (kill after ${delay_ms} ms, sync_action at kill $at_kill, progress $last, complete $complete)"
    else
        log "run $run: FAIL (kill after ${delay_ms} ms, sync_action at kill $at_kill, progress $last): ${bad[*]}"
        problems+=("run $run at ${delay_ms} ms: ${bad[0]}")
    fi
    mdadm --stop /dev/md0 >/dev/null
    mdadm --zero-superblock "${DISKS[0]}" "${DISKS[1]}"
    udevadm settle --timeout=10 || true
done
set_limits "$ORIG_MIN" "$ORIG_MAX"
info "SIGKILL of a freeze-and-skip wipe + policy restore: $ok/$RUNS clean"
[ "$ok" = "$RUNS" ] || fail "freeze left behind: $ok/$RUNS clean; first: ${problems[0]}"

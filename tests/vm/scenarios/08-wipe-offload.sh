# vm-timeout: 700
# Wipe offload on real md. Member offload: a `zero` wipe of a raid1 and of a raid5 is done by the
# members (virtio-blk write-zeroes) when md reports write_zeroes_max_bytes 0; the arrays read
# back as zeros through md and a `check` reports mismatch_cnt 0. Resume: a random wipe of a
# resyncing raid1 killed with SIGKILL half-way, resumed with --verify; the resync is skipped
# (the array stayed frozen) and `check` reports 0. Hand-over: the wiped array's udev change.
need_disks 3
require wipe
MD_SIZE=512M
for d in "${DISKS[0]}" "${DISKS[1]}" "${DISKS[2]}"; do
    wz=$(cat "/sys/class/block/$(basename "$d")/queue/write_zeroes_max_bytes")
    [ "$wz" -gt 0 ] || skip "$d reports write_zeroes_max_bytes 0: no member offload to test"
done

offload_case() { # offload_case LEVEL DISK...
    local level=$1 wz
    shift
    set_limits 1000 10000
    if [ "${ASSUME_CLEAN:-0}" = 1 ]; then
        mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level="$level" --raid-devices=$# \
            --size="$MD_SIZE" --assume-clean "$@" || fail "mdadm --create /dev/md0 failed"
        udevadm settle --timeout=20 2>/dev/null || true
    else
        md_create md0 "$level" "$@"
    fi
    wz=$(cat /sys/block/md0/queue/write_zeroes_max_bytes)
    [ "$wz" = 0 ] || { log "md0 ($level) offloads itself (write_zeroes_max_bytes $wz): nothing to test"; mdadm --stop /dev/md0 >/dev/null; return; }
    dirty /dev/md0 32
    run_mdp /tmp/off.jsonl wipe /dev/md0 --yes --progress json
    assert_eq "$MDP_RC" 0 "mdpilot wipe of $level md0 exit status"
    head -1 /tmp/off.jsonl | jq -e '.reasons | map(select(startswith("member offload:"))) | length == 1' >/dev/null ||
        fail "$level: the plan did not choose member offload: $(head -1 /tmp/off.jsonl | jq -c .reasons)"
    tail -1 /tmp/off.jsonl | jq -e '.outcome.offloaded == true and .outcome.resync_skipped == true' >/dev/null ||
        fail "$level: outcome $(tail -1 /tmp/off.jsonl)"
    secs=$(tail -1 /tmp/off.jsonl | jq -r '.outcome.wipe_s')
    assert_eq "$(md_attr md0 sync_action)" idle "$level md0 sync_action after the offload"
    assert_eq "$(md_attr md0 resync_start)" none "$level md0 resync_start after the offload"
    echo 3 >/proc/sys/vm/drop_caches
    is_zero /dev/md0 32 || fail "$level md0 does not read back as zeros after member offload"
    set_limits 1000 2000000
    md_set md0 sync_action check
    wait_for 5 sync_is md0 check || true
    wait_for 200 sync_is md0 idle || fail "$level check did not finish"
    assert_eq "$(md_attr md0 mismatch_cnt)" 0 "$level mismatch_cnt after member offload"
    # The same array wiped through md (BLKZEROOUT on md0: `--method zeroout` never offloads),
    # side by side: the member-offload bench figure (goal >= 5x).
    run_mdp /tmp/md.jsonl wipe /dev/md0 --yes --method zeroout --progress json
    assert_eq "$MDP_RC" 0 "mdpilot wipe --method zeroout of $level md0 exit status"
    md_secs=$(tail -1 /tmp/md.jsonl | jq -r '.outcome.wipe_s')
    ratio=$(awk -v a="$md_secs" -v b="$secs" 'BEGIN{ if (b <= 0) b = 1e-6; printf "%.1f", a / b }')
    info "member offload $level: $(blockdev --getsize64 /dev/md0) bytes in ${secs} s, zeros read back, check 0; through md (BLKZEROOUT on md0) ${md_secs} s: ${ratio}x"
    mdadm --stop /dev/md0 >/dev/null
    mdadm --zero-superblock "$@"
}
offload_case 1 "${DISKS[0]}" "${DISKS[1]}"
# mdadm builds a new raid5 by recovering its last member (a spare until then): no offload while
# that runs (the planner says "sync_action is recover"). --assume-clean skips it, leaving parity
# that does not match the members' old content: a `check` of 0 afterwards shows the offload made
# data and parity consistent.
ASSUME_CLEAN=1 offload_case 5 "${DISKS[0]}" "${DISKS[1]}" "${DISKS[2]}"

# Resume after SIGKILL: a random wipe of a resyncing raid1, throttled so it is mid-way.
set_limits 1000 10000
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
dirty /dev/md0 64
throttle /dev/md0 40000000
throttled_bg /tmp/r1.jsonl /tmp/r1.err "$MDP" wipe /dev/md0 --yes --progress json --method random
wpid=$THROTTLED_PID
# (jq 1.6 -e exits 0 on empty input: test the line first.)
half() {
    local l
    l=$(grep '"phase":"wipe"' /tmp/r1.jsonl | tail -1)
    [ -n "$l" ] && jq -e '.done_bytes * 2 >= .total_bytes' <<<"$l" >/dev/null 2>&1
}
wait_for 60 half || { cat /tmp/r1.err; fail "the throttled random wipe made no progress"; }
kill -KILL "$wpid"
wait "$wpid" || true
killed_at=$(grep '"phase":"wipe"' /tmp/r1.jsonl | tail -1 | jq -r .done_bytes)
log "killed at $killed_at bytes; sync_action $(md_attr md0 sync_action)"
ls /var/lib/mdpilot/wipe/*.json >/dev/null 2>&1 || fail "no checkpoint after SIGKILL"
durable=$(jq -r .durable_offset /var/lib/mdpilot/wipe/*.json)
run_mdp /tmp/r2.jsonl wipe /dev/md0 --yes --progress json --resume --verify
assert_eq "$MDP_RC" 0 "resumed wipe exit status"
tail -1 /tmp/r2.jsonl | jq -e '.outcome.verified == true' >/dev/null || fail "resumed wipe did not verify: $(tail -1 /tmp/r2.jsonl)"
skipped=$(tail -1 /tmp/r2.jsonl | jq -r .outcome.resync_skipped)
resumed=$(tail -1 /tmp/r2.jsonl | jq -r .outcome.resumed_bytes)
[ "$resumed" = "$durable" ] || fail "resumed_bytes $resumed, the checkpoint said $durable"
[ "$durable" -gt 0 ] || fail "the checkpoint saved nothing before the kill at $killed_at bytes"
assert_eq "$skipped" true "resync skipped after the resume (the array stayed frozen)"
assert_eq "$(md_attr md0 resync_start)" none "resync_start after the resumed wipe"
ls /var/lib/mdpilot/wipe/*.json >/dev/null 2>&1 && fail "checkpoint left after the resumed job completed"
set_limits 1000 2000000
wait_for 200 sync_is md0 idle || fail "md0 did not become idle"
md_set md0 sync_action check
wait_for 5 sync_is md0 check || true
wait_for 200 sync_is md0 idle || fail "check did not finish"
assert_eq "$(md_attr md0 mismatch_cnt)" 0 "mismatch_cnt after the resumed random wipe"
info "resume: killed at $killed_at bytes, checkpoint at $durable, resumed $resumed bytes on and verified the whole array, resync skipped, check 0"

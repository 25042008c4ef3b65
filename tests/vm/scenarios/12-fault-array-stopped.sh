# vm-timeout: 240
# The array stopped between two wipes: the first wipe succeeds; after `mdadm --stop`
# a second `mdpilot wipe /dev/md0` fails cleanly (exit 1, a message naming md0, no panic) and
# leaves nothing behind; a member of the stopped array can then be wiped (exit 0).
need_disks 2
require wipe
ORIG_MIN=1000
ORIG_MAX=10000
MD_SIZE=256M
set_limits "$ORIG_MIN" "$ORIG_MAX"
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
run_mdp /tmp/w1.jsonl wipe /dev/md0 --yes --progress json
assert_eq "$MDP_RC" 0 "first wipe of md0: exit status"
no_leftovers "after the first wipe" "$ORIG_MIN" "$ORIG_MAX"
mdadm --stop /dev/md0 || fail "mdadm --stop /dev/md0 failed"
udevadm settle --timeout=10 || true
run_mdp /tmp/w2.jsonl wipe /dev/md0 --yes --progress json
grep -q 'panicked' /tmp/w2.jsonl.err && fail "mdpilot panicked"
[ "$MDP_RC" != 0 ] || fail "a wipe of the stopped md0 exited 0"
assert_eq "$MDP_RC" 1 "wipe of the stopped md0: exit status"
grep -q 'md0' /tmp/w2.jsonl.err || fail "the error does not name md0: $(cat /tmp/w2.jsonl.err)"
no_leftovers "after the wipe of the stopped array" "$ORIG_MIN" "$ORIG_MAX"
info "array stopped between two wipes: second wipe exit $MDP_RC, '$(tail -1 /tmp/w2.jsonl.err)'"
run_mdp /tmp/w3.jsonl wipe "${DISKS[0]}" --yes --method signatures --progress json
assert_eq "$MDP_RC" 0 "wipe of a member of the stopped array: exit status"
mdadm --examine "${DISKS[0]}" >/dev/null 2>&1 && fail "${DISKS[0]} still has an md superblock"
no_leftovers "after the member wipe" "$ORIG_MIN" "$ORIG_MAX"

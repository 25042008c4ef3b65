# vm-timeout: 120
# Refusal: wiping a member of an active array fails with the reason and writes nothing; after
# `mdadm --stop` the same wipe succeeds and `mdadm --examine` finds no superblock.
need_disks 2
require wipe
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
member=${DISKS[0]}
run_mdp /tmp/out wipe "$member" --yes
[ "$MDP_RC" != 0 ] || fail "wiping $member, a member of active md0, exited 0"
grep -q "$(basename "$member")" /tmp/out.err || fail "the refusal does not name $member"
grep -qi -E 'md0|member|holder|in use|busy' /tmp/out.err || fail "the refusal gives no reason: $(cat /tmp/out.err)"
mdadm --examine "$member" >/dev/null 2>&1 || fail "the refused wipe destroyed $member's superblock"
assert_eq "$(md_attr md0 array_state | sed 's/^\(clean\|active\|write-pending\|active-idle\)$/running/')" running "md0 still running"
info "refusal: $(grep -m1 -i mdpilot /tmp/out.err || head -1 /tmp/out.err)"

mdadm --stop /dev/md0 >/dev/null || fail "mdadm --stop /dev/md0"
run_mdp /tmp/out wipe "$member" --yes
assert_eq "$MDP_RC" 0 "wipe of $member after mdadm --stop exit status"
if mdadm --examine "$member" >/tmp/examine 2>&1; then
    cat /tmp/examine
    fail "mdadm --examine still finds a superblock on $member"
fi
grep -qi 'no md superblock' /tmp/examine || { cat /tmp/examine; fail "unexpected mdadm --examine output"; }
log "ok: $(cat /tmp/examine)"

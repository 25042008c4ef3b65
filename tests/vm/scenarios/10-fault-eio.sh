# vm-timeout: 300
# EIO in the middle of a wipe: device-mapper `error` regions make writes fail part-way.
# 1. A plain dm device (linear, error, linear): `mdpilot wipe` fails with the offset and the errno,
#    exit 1, and takes no lease.
# 2. A raid1 in its initial resync whose two members both fail writes in the same region (so md
#    cannot hide the error behind the other mirror): the freeze-and-skip wipe fails with the offset
#    and errno, exit 1; afterwards sync_action is not `frozen`, the limits are the originals and no
#    lease is left.
need_disks 3
require wipe
ORIG_MIN=1000
ORIG_MAX=10000
set_limits "$ORIG_MIN" "$ORIG_MAX"
MIB=2048 # sectors per MiB

# ---- 1. plain device: 256 MiB good, 64 MiB error, 256 MiB good
dm_create flaky0 "0 $((256 * MIB)) linear ${DISKS[0]} 0
$((256 * MIB)) $((64 * MIB)) error
$((320 * MIB)) $((256 * MIB)) linear ${DISKS[0]} $((320 * MIB))"
run_mdp /tmp/w1.jsonl wipe /dev/mapper/flaky0 --yes --progress json
assert_eq "$MDP_RC" 1 "wipe of a device with an error region: exit status"
msg=$(grep -o 'failed at offset [0-9]* bytes (errno [0-9]*)' /tmp/w1.jsonl.err | head -1 || true)
[ -n "$msg" ] || fail "no 'failed at offset N bytes (errno E)' on stderr: $(tail -2 /tmp/w1.jsonl.err)"
off=$(sed 's/.*offset \([0-9]*\) bytes.*/\1/' <<<"$msg")
errno=$(sed 's/.*errno \([0-9]*\)).*/\1/' <<<"$msg")
assert_eq "$errno" 5 "errno of the failed write (EIO)"
# The failing request starts before the end of the error region (a zero-out request may start
# before the region and cover it).
[ "$off" -lt $((320 << 20)) ] || fail "reported offset $off is past the error region (256..320 MiB)"
grep -q 'flaky0\|dm-' <<<"$msg$(cat /tmp/w1.jsonl.err)" || fail "the error does not name the device"
jq -e 'select(.event == "completed") | .success == false' /tmp/w1.jsonl >/dev/null ||
    fail "no completed event with success false in the JSON progress"
no_leftovers "after the failed plain wipe" "$ORIG_MIN" "$ORIG_MAX"
info "EIO mid-way on a dm device: exit 1, '$msg'"
dmsetup remove flaky0

# ---- 2. raid1 in its initial resync, both members failing writes at member offset 200..216 MiB
for i in 1 2; do
    dev=${DISKS[$i]}
    dm_create "m$i" "0 $((200 * MIB)) linear $dev 0
$((200 * MIB)) $((16 * MIB)) error
$((216 * MIB)) $((296 * MIB)) linear $dev $((216 * MIB))"
done
md_create md0 1 /dev/mapper/m1 /dev/mapper/m2
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
before_min=$(md_attr md0 sync_speed_min)
before_max=$(md_attr md0 sync_speed_max)
run_mdp /tmp/w2.jsonl wipe /dev/md0 --yes --progress json
cat /proc/mdstat
assert_eq "$MDP_RC" 1 "wipe of md0 whose members both fail writes: exit status"
msg=$(grep -o 'failed at offset [0-9]* bytes (errno [0-9]*)' /tmp/w2.jsonl.err | head -1 || true)
[ -n "$msg" ] || fail "no 'failed at offset N bytes (errno E)' on stderr: $(tail -2 /tmp/w2.jsonl.err)"
grep -q 'md0' /tmp/w2.jsonl.err || fail "the error does not name md0"
sleep 1
state=$(md_attr md0 sync_action)
log "md0 after the failed wipe: sync_action $state, resync_start $(md_attr md0 resync_start)"
[ "$state" != frozen ] || fail "md0 sync_action left frozen after the failed wipe"
[ "$(md_attr md0 resync_start)" != none ] || fail "resync_start is none after a wipe that failed"
assert_eq "$(md_attr md0 sync_speed_min)" "$before_min" "md0 sync_speed_min after the failed wipe"
assert_eq "$(md_attr md0 sync_speed_max)" "$before_max" "md0 sync_speed_max after the failed wipe"
no_leftovers "after the failed raid1 wipe" "$ORIG_MIN" "$ORIG_MAX"
info "EIO mid-way on md raid1 (both mirrors): exit 1, '$msg', sync_action afterwards $state"
mdadm --stop /dev/md0 >/dev/null
dm_remove_all

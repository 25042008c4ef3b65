# vm-timeout: 180
# Discovery: a raid1, a raid5, a degraded raid1 and an inactive array show up in
# `mdpilot status --json` (shared/contracts/status-json.md) and as D-Bus objects
# /org/mdpilot/MdPilot1/arrays/<uuid> with the right levels, members and states.
need_disks 8
require status
d=("${DISKS[@]}")
set_limits 1000 20000 # keep the syncs running: status must report them too
md_create md0 1 "${d[0]}" "${d[1]}"
md_create md1 5 "${d[2]}" "${d[3]}" "${d[4]}"
mdadm --create /dev/md2 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 "${d[5]}" missing ||
    fail "mdadm --create degraded md2"
# Inactive: a raid1 stopped and then assembled incrementally from one member (mdadm -I starts an
# array only once every member is there).
mdadm --create /dev/md3 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --assume-clean "${d[6]}" "${d[7]}" ||
    fail "mdadm --create md3"
mdadm --stop /dev/md3 >/dev/null
mdadm --incremental "${d[6]}" >/dev/null 2>&1 || true
udevadm settle --timeout=10 || true
cat /proc/mdstat
inactive=$(awk '$2 == ":" && $3 == "inactive" {print $1; exit}' /proc/mdstat)
[ -n "$inactive" ] || fail "could not make an inactive array (see /proc/mdstat above)"
log "inactive array: $inactive"

run_mdp /tmp/status.json status --json
assert_eq "$MDP_RC" 0 "mdpilot status --json exit status"
j() { jq -r "$1" /tmp/status.json; }
a() { jq -r --arg n "$1" ".arrays[] | select(.name == \$n) | $2" /tmp/status.json; }
assert_eq "$(j '.errors | length')" 0 "number of parse errors"
assert_eq "$(j '.speed_limit_max')" 20000 "speed_limit_max"
assert_eq "$(j '[.arrays[].name] | sort | join(" ")')" "$(printf '%s\n' md0 md1 md2 "$inactive" | sort | xargs)" "array names"
assert_eq "$(a md0 .level)" raid1 "md0 level"
assert_eq "$(a md0 .state)" active "md0 state"
assert_eq "$(a md0 .raid_disks)" 2 "md0 raid_disks"
assert_eq "$(a md0 '[.members[].name] | sort | join(" ")')" "$(basename "${d[0]}") $(basename "${d[1]}")" "md0 members"
assert_eq "$(a md0 .metadata)" 1.2 "md0 metadata"
assert_eq "$(a md1 .level)" raid5 "md1 level"
assert_eq "$(a md1 .raid_disks)" 3 "md1 raid_disks"
assert_eq "$(a md1 '.members | length')" 3 "md1 member count"
# mdadm builds a raid5 degraded plus a spare: its initial sync is a recovery.
case "$(a md1 '.sync.action // "none"')" in recovery | recover) log "ok: md1 sync action is a recovery" ;;
    *) fail "md1 sync action: $(a md1 '.sync.action') (sysfs: $(md_attr md1 sync_action))" ;; esac
assert_eq "$(a md2 .level)" raid1 "md2 level"
assert_eq "$(a md2 .active_disks)" 1 "md2 active_disks"
assert_eq "$(a md2 .member_status)" U_ "md2 member_status"
assert_eq "$(a "$inactive" .state)" inactive "$inactive state"
assert_eq "$(a "$inactive" '[.members[].name] | join(" ")')" "$(basename "${d[6]}")" "$inactive members"
sync0=$(a md0 '.sync.action // "none"')
case $sync0 in resync | none) ;; *) fail "md0 sync action: $sync0" ;; esac

# The same arrays on the system bus.
require serve
start_service
busctl --system tree "$BUS_NAME" || true
objs=$(busctl --system --json=short call "$BUS_NAME" "$BUS_PATH" org.freedesktop.DBus.ObjectManager GetManagedObjects |
    jq -r '.data[0] | keys[]')
echo "$objs"
for n in md0 md1 md2 "$inactive"; do
    grep -qx "$(array_path "$n")" <<<"$objs" || fail "no D-Bus object for $n"
done
assert_eq "$(array_prop md0 Level)" '"raid1"' "D-Bus md0 Level"
assert_eq "$(array_prop md1 Level)" '"raid5"' "D-Bus md1 Level"
assert_eq "$(array_prop md0 NumDevices)" 2 "D-Bus md0 NumDevices"
assert_eq "$(array_prop md1 NumDevices)" 3 "D-Bus md1 NumDevices"
deg=$(array_prop md2 Degraded)
[ "$deg" != 0 ] && [ "$deg" != false ] || fail "D-Bus md2 Degraded is $deg"
assert_eq "$(array_prop md0 Degraded)" 0 "D-Bus md0 Degraded"
for m in "${d[0]}" "${d[1]}"; do
    array_prop md0 Members | grep -q "$(basename "$m")" || fail "D-Bus md0 Members lacks $(basename "$m")"
done
array_prop "$inactive" State | grep -q inactive || fail "D-Bus $inactive State: $(array_prop "$inactive" State)"
# One spelling of the UUID, the one `mdadm --detail` prints: in the JSON (`sysfs.uuid`; the
# kernel's own text is `sysfs.md_uuid`) and on D-Bus.
for n in md0 md1; do
    want=$(mdadm --detail --export "/dev/$n" | sed -n 's/^MD_UUID=//p')
    [ -n "$want" ] || fail "mdadm --detail --export /dev/$n gave no MD_UUID"
    assert_eq "$(a "$n" .sysfs.uuid)" "$want" "status --json $n sysfs.uuid (mdadm --detail's)"
    assert_eq "$(array_prop "$n" UUID)" "\"$want\"" "D-Bus $n UUID (mdadm --detail's)"
done
info "UUID: mdadm --detail, status --json and D-Bus agree ($want for md1)"
stop_service

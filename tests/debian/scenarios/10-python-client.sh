# The GLib client of tests/dbus_clients.rs (examples/installer_client.py, python3-gi,
# no mdpilot code) on the system bus against the packaged service and a real raid1 made with
# mdadm: it lists the arrays, takes the install lease, zeroes a loop device with a wipe job
# followed through PropertiesChanged, releases the lease and exits 0; nothing is left (no
# lease on the bus, speed_limit_min back to the original, the loop device all zeros).
# vm-timeout: 180
need_disks 4
client=$T/installer_client.py
[ -f "$client" ] || fail "$client is not in the guest (tests/debian/build's overlay)"
name_on_bus || systemctl start mdpilot.service
# md1: a raid1 on the last two data disks (04-array's md0 holds the first two; 05 and 07 only
# refused or wiped signatures on these).
md=md1
md_create "$md" 1 "${DISKS[2]}" "${DISKS[3]}"
img=/tmp/work/wipe.img loop=
cleanup() {
    [ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true
    if [ -e "/dev/$md" ]; then
        mdadm --stop "/dev/$md" >/dev/null 2>&1 || true
        mdadm --zero-superblock "${DISKS[2]}" "${DISKS[3]}" 2>/dev/null || true
    fi
}
trap cleanup EXIT
on_bus() {
    gdbus call --system --dest "$BUS_NAME" --object-path "$BUS_PATH" \
        --method org.freedesktop.DBus.ObjectManager.GetManagedObjects | grep -q "<'$md'>"
}
wait_for 20 on_bus || fail "$md is not among the ObjectManager's objects"
# The device to wipe: a loop device on a 64 MiB file of 0x5a bytes, attached here.
head -c $((64 << 20)) /dev/zero | tr '\000' '\132' >"$img"
loop=$(losetup --find --show "$img") || fail "losetup --find --show $img failed"
log "wiping $loop"
orig=$(limit_min)
omax=$(limit_max)
t0=$(date +%s%N)
rc=0
/usr/bin/python3 "$client" --device "$loop" --method zero --timeout 120 >/tmp/work/client.out 2>&1 || rc=$?
cat /tmp/work/client.out
assert_eq "$rc" 0 "installer_client.py exit status"
info "installer_client.py (GLib, system bus, real service): $((($(date +%s%N) - t0) / 1000000)) ms"
for step in "arrays: " "lease: " "job: /org/mdpilot/MdPilot1/jobs/" "completed: True" released "clean: no leases"; do
    grep -q "^$step" /tmp/work/client.out || fail "installer_client.py printed no '$step' line"
done
grep "^arrays: " /tmp/work/client.out | grep -q "$md (" || fail "installer_client.py did not list $md"
info "$(grep '^lease: ' /tmp/work/client.out)"
# Nothing left, as the kernel and the bus see it (not only as the client saw it).
assert_eq "$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Leases)" "aa{sv} 0" "Leases after the client"
assert_eq "$(limit_min)" "$orig" "speed_limit_min after the client"
assert_eq "$(limit_max)" "$omax" "speed_limit_max after the client"
blockdev --flushbufs "$loop" 2>/dev/null || true
cmp -s -n $((64 << 20)) "$loop" /dev/zero || fail "$loop is not all zeros after the wipe: $(od -A d -t x1 -N 16 "$loop" | head -1)"
log "ok: $loop is all zeros"

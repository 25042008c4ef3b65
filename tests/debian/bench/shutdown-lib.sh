# Shared by the guest steps of tests/debian/bench-shutdown (sourced): the disks by their
# serials, the persistent state directory, the timed poweroff.
data() { readlink -f "/dev/disk/by-id/virtio-mdpilot-data$1"; }
state_disk=$(readlink -f /dev/disk/by-id/virtio-sd-state)
[ -b "$state_disk" ] || fail "no state disk (serial sd-state)"
mount_state() {
    mkdir -p /var/lib/mdpilot
    mount "$state_disk" /var/lib/mdpilot || fail "mount of the state disk failed"
}
install_mdpilot() {
    dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || fail "dpkg -i mdpilot.deb failed: $(tail -3 /tmp/dpkg.log)"
    systemctl is-active -q mdpilot.service || systemctl start mdpilot.service || fail "mdpilot.service did not start"
}
# position mdN: the check's position in /proc/mdstat, KiB.
position() {
    sed -n "/^$1 /,/^\$/s/.*check = *[0-9.]*% (\([0-9]*\)\/.*/\1/p" /proc/mdstat | head -1
}
# poweroff_now WAY: the line the host times from, then the poweroff (ends this step).
poweroff_now() {
    sync
    echo "@@POWEROFF $1 $(cut -d' ' -f1 /proc/uptime)"
    systemctl poweroff
    sleep 600
}

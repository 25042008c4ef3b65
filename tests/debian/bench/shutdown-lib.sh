# Shared by the guest steps of tests/debian/bench-shutdown (sourced): the disks by their
# serials, the state directory kept on a disk of its own, the timed poweroff.
data() { readlink -f "/dev/disk/by-id/virtio-mdpilot-data$1"; }
state_disk=$(readlink -f /dev/disk/by-id/virtio-sd-state)
[ -b "$state_disk" ] || fail "no state disk (serial sd-state)"
# keep_state: the guest's root is an initramfs (a real machine's /var/lib persists), so a unit
# ordered before mdpilot.service (hence stopped after it at the shutdown, once the service has
# saved its record) writes /var/lib/mdpilot to the raw state disk as a tar archive: no
# filesystem, so the standard root (no mkfs) does.
keep_state() {
    mkdir -p /var/lib/mdpilot
    cat >/etc/systemd/system/sd-state.service <<UNIT
[Unit]
Description=Keep /var/lib/mdpilot on the state disk (tests/debian/bench-shutdown)
Before=mdpilot.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=/bin/sh -c 'tar -C /var/lib -cf $state_disk mdpilot && sync'
UNIT
    systemctl daemon-reload
    systemctl start sd-state.service || fail "sd-state.service did not start"
}
# restore_state: /var/lib/mdpilot as the last boot's shutdown left it.
restore_state() {
    mkdir -p /var/lib
    tar -C /var/lib -xf "$state_disk" || fail "no state archive on the state disk"
}
install_mdpilot() {
    dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || fail "dpkg -i mdpilot.deb failed: $(tail -3 /tmp/dpkg.log)"
    systemctl is-active -q mdpilot.service || systemctl start mdpilot.service || fail "mdpilot.service did not start"
}
# position mdN: the check's position in /proc/mdstat, KiB.
position() {
    sed -n "/^$1 /,/^\$/s/.*check = *[0-9.]*% (\([0-9]*\)\/.*/\1/p" /proc/mdstat | head -1
}
# assembled: the array udev assembled at this boot (another name than the first boot's: md127);
# sets md.
assembled() {
    found() { ls -d /sys/block/md*/md/sync_action >/dev/null 2>&1; }
    wait_for 60 found || fail "udev did not assemble the array: $(cat /proc/mdstat)"
    md=$(ls -d /sys/block/md* | head -1)
    md=${md##*/}
}
# poweroff_now WAY: the line the host times from, then the poweroff (ends this step).
poweroff_now() {
    sync
    echo "@@POWEROFF $1 $(cut -d' ' -f1 /proc/uptime)"
    systemctl poweroff
    sleep 600
}

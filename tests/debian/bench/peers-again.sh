# The second boot of benches/peers, on the same disks: what a reboot in the middle of a check did
# to each tool's check. The first boot (peers.sh, phase `checks`) left Debian's mdcheck checking
# md20/md21 and mdpilot's schedule checking md22/md23 (shared disks within each pair, a
# mismatch planted in every array), stopped both as a shutdown does and saved /var/lib/mdcheck,
# /var/lib/mdpilot and mdpilot's config.d to the disk with serial `peers-state`.
# Here: the state restored before anything reads it, then, stamped in CLOCK_MONOTONIC:
#   - the kernel's view right after the boot (does any check run? from where?);
#   - mdpilot's .deb installed: its service resumes its check (md/sync_min = its position);
#   - Debian's continuation, as mdcheck_continue.timer starts it (daily, up to 12 h late):
#     mdcheck --continue, from /var/lib/mdcheck's positions;
#   - every check run to its end at md's default speed, then where its result can be read:
#     md/mismatch_cnt, the journal, mdadm --monitor's PROGRAM, mdpilot's record and properties,
#     udisksd's MDRaid object.
# Raw records go to /run/peers and, as a tar archive, to the disk with serial `peers-out`.
# vm-timeout: 1500
P=/run/peers
OBS=$T/bench/peers_observe.py
mkdir -p $P
out_disk=/dev/disk/by-id/virtio-peers-out
state_disk=/dev/disk/by-id/virtio-peers-state
[ -b "$out_disk" ] || fail "no output disk (serial peers-out)"
[ -b "$state_disk" ] || fail "no state disk (serial peers-state)"
pids=()
finish() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    systemctl kill -s KILL mdcheck_continue.service 2>/dev/null || true
    journalctl --no-pager -o short-monotonic >$P/journal.txt 2>/dev/null || true
    tar -C $P -cf /tmp/peers-out.tar . || echo "@@PEERS tar failed"
    dd if=/tmp/peers-out.tar of="$(readlink -f "$out_disk")" bs=1M conv=fsync status=none || echo "@@PEERS dd failed"
}
trap finish EXIT
mark() { echo "$EPOCHREALTIME $*" >>$P/marks.log; log "mark: $*"; }
state() {
    mark "state $1"
    python3 $OBS state "$1" >>$P/state.jsonl 2>>$P/observer.err || true
}
python3 $OBS clock >>$P/clock.jsonl
mark "boot2"
tar -C / -xf "$(readlink -f "$state_disk")" || fail "the state disk holds no saved state"
# The names of the first boot are gone (udev assembles them as md127 and down): by UUID.
name_of() {
    local f
    for f in /sys/block/md*/md/uuid; do
        [ "$(tr -d -- '-:\n' <"$f")" = "$(tr -d -- '-:\n' <<<"$1")" ] && { f=${f#/sys/block/}; echo "${f%%/*}"; return 0; }
    done
    return 1
}
assembled() { [ "$(ls -d /sys/block/md*/md 2>/dev/null | wc -l)" -ge 5 ]; }
wait_for 120 assembled || fail "udev did not assemble the five arrays: $(cat /proc/mdstat)"
udevadm settle --timeout=30 || true
cat /proc/mdstat
declare -A name
while read -r old uuid; do
    name[$old]=$(name_of "$uuid") || fail "$old ($uuid) was not assembled"
    echo "$old ${name[$old]} $uuid"
done <$P/checks-uuids.txt >$P/names.txt
python3 $OBS kernel 1 >>$P/kernel-checks.jsonl 2>>$P/observer.err &
pids+=($!)
state boot
# mdadm --monitor (started at boot by the package) with the PROGRAM of the first boot.
cat >/usr/local/sbin/peers-mdmonitor-program <<'EOF'
#!/bin/bash
echo "$EPOCHREALTIME $*" >>/run/peers/mdmonitor.log
EOF
chmod 755 /usr/local/sbin/peers-mdmonitor-program
echo "PROGRAM /usr/local/sbin/peers-mdmonitor-program" >>/etc/mdadm/mdadm.conf
touch $P/mdmonitor.log
systemctl restart mdmonitor.service || log "mdmonitor.service did not restart"
# To the end at md's default speed: the 500 KiB/s of the first boot (md's limit, mdpilot's
# check_max) kept the checks mid-way for the reboot; md's limit went with that boot.
sed -i '/^check_max/d' /etc/mdpilot/config.d/60-peers-checks.toml
# The pair under its new names as well (the UUIDs in `include` name it whatever md calls it).
sed -i "s|^include = \[|include = [\"${name[md22]}\", \"${name[md23]}\", |" /etc/mdpilot/config.d/60-peers-checks.toml
cat /etc/mdpilot/config.d/60-peers-checks.toml
# mdpilot: the .deb installed starts the service, which reads its restored record.
mark "boot2 mdpilot install"
dpkg -i "$DEB" >$P/dpkg.log 2>&1 || fail "dpkg -i mdpilot.deb failed: $(tail -3 $P/dpkg.log)"
systemctl is-active -q mdpilot.service || systemctl start mdpilot.service || fail "mdpilot.service did not start"
mine_running() {
    local a
    for a in md22 md23; do [ "$(cat "/sys/block/${name[$a]}/md/sync_action")" = check ] && return 0; done
    return 1
}
wait_for 120 mine_running || log "mdpilot resumed no check: $(journalctl -u mdpilot --no-pager | tail -5)"
state mdpilot-resumed
# The resumed check keeps its throttle (500 KiB/s, saved with it): to the end at md's default
# speed through mdpilot's own pause and resume (the position was read above).
for a in md22 md23; do
    [ "$(cat "/sys/block/${name[$a]}/md/sync_action")" = check ] || continue
    mdpilot check pause "${name[$a]}" >/dev/null 2>&1 && mdpilot check resume --max 200000 "${name[$a]}" >/dev/null 2>&1 ||
        log "could not lift the throttle of ${name[$a]}'s check"
done
# Debian: what mdcheck_continue.timer runs when it fires.
mark "boot2 mdcheck continue"
systemctl start --no-block mdcheck_continue.service
debian_running() {
    local a
    for a in md20 md21; do [ "$(cat "/sys/block/${name[$a]}/md/sync_action")" = check ] && return 0; done
    return 1
}
wait_for 60 debian_running || log "mdcheck --continue started no check: $(journalctl -t mdcheck --no-pager | tail -5)"
sleep 5
state mdcheck-continued
all_done() {
    local a
    for a in md20 md21 md22 md23; do idle "${name[$a]}" || return 1; done
}
# mdpilot starts the second of its pair at its next tick (30 s) after the first ends.
settled() { all_done && sleep 40 && all_done; }
wait_for 900 settled || log "the checks did not all end: $(cat /proc/mdstat)"
mark "boot2 checks ended"
# mdadm --monitor reports a finished check at its next read (60 s).
sleep 65
state results
mdpilot check status >$P/mdpilot-check-status.txt 2>&1 || true
mdpilot check status --json >$P/mdpilot-check-status.json 2>&1 || true
journalctl --no-pager -o short-monotonic -t mdcheck >$P/journal-mdcheck.txt 2>&1 || true
journalctl --no-pager -o short-monotonic -u mdpilot.service | grep -i check >$P/journal-mdpilot-check.txt 2>&1 || true
cp /var/lib/mdpilot/checks.toml $P/checks.toml 2>/dev/null || true
ls -la /var/lib/mdcheck >$P/mdcheck-files.txt 2>&1 || true
mark "boot2 end"

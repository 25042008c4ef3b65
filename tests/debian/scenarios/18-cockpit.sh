# The Cockpit page "RAID (mdpilot)" (the cockpit-mdpilot .deb) under the shipped unit, with a
# real login: cockpit-ws (Debian 12's cockpit 287, Debian 13's 337) on port 9090, which tests/debian/run forwards
# to the host, where tests/debian/cockpit-host drives headless Chromium through cockpit's login
# page. This side: the package installed, two users with passwords (`opsadmin` in group sudo,
# `tester` without rights), a real raid1 resyncing slowly (speed_limit_max 1000 KiB/s), then it
# answers the host driver's questions on the second serial port (/dev/ttyS1, a socket on the
# host), one line each:
#   (unasked, every 3 s until the host says something) READY <array>: all of the above in place
#   LEASE? HOLDER     -> LEASE OK <text> | LEASE MISSING <text>: the lease on the bus, in
#                        `mdpilot policy show` and in speed_limit_min, as root sees them
#   DONE PASS | DONE FAIL <reason> | DONE SKIP <reason>: the host's verdict, this scenario's
# The host driver's own waits (each step bounded) give the verdict; this side's 900 s is only a
# guard against a host that never answers: a loaded CI host once took 200 s to log in twice
# on Cockpit 337 (its bridge is Python, slow to start under TCG) while the page was working.
# Without the host driver (no ttyS1 peer), it fails after its wait. The array is stopped and its
# members' superblocks zeroed at the end, the speed limits put back.
# vm-timeout: 960
need_disks 4
[ -f "$T/cockpit-mdpilot.deb" ] || skip "no cockpit-mdpilot .deb in the guest (packaging/build-cockpit-deb needs node and npm)"
[ -x /usr/lib/cockpit/cockpit-ws ] || fail "cockpit-ws is not in the guest root (tests/debian/build's package list)"
ctl=/dev/ttyS1
[ -c "$ctl" ] || fail "no $ctl (tests/debian/run gives the guest a second serial port for 18-cockpit)"
dpkg -i "$T/cockpit-mdpilot.deb" || fail "dpkg -i cockpit-mdpilot.deb failed"
[ -f /usr/share/cockpit/mdpilot/manifest.json ] || fail "the package did not install the page's manifest"

# Cockpit before 330 (Debian 12's 287) runs cockpit-session setuid from the ws instance's static
# group: the root archive makes every file root's (cpio -R 0:0), so it goes back to the group its
# package gives it (dpkg-statoverride), else the ws instance cannot run it ("Internal error in
# login process"). Later ones (Debian 13's 337) start it from cockpit-session.socket instead
# (DynamicUser, no such group, not setuid).
if getent group cockpit-wsinstance >/dev/null; then
    chown root:cockpit-wsinstance /usr/lib/cockpit/cockpit-session
    chmod 4750 /usr/lib/cockpit/cockpit-session
fi
# The network of qemu's user mode (slirp): the host's hostfwd reaches 10.0.2.15:9090.
mkdir -p /etc/systemd/network /etc/cockpit
printf '[Match]\nType=ether\n[Network]\nAddress=10.0.2.15/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' \
    >/etc/systemd/network/10-mdpilot-tests.network
systemctl start systemd-networkd.service || fail "systemd-networkd did not start"
# Plain HTTP: the forwarded port is on the host's loopback only (no certificate to accept).
# The login's time limit (cockpit-ws waits 30 s by default for the session to answer): Cockpit
# 337's bridge is Python, whose start under TCG on a loaded host took longer ("Authentication
# failed: Timeout"); a real machine answers in about a second.
printf '[WebService]\nAllowUnencrypted = true\n\n[basic]\ntimeout = 120\n' >/etc/cockpit/cockpit.conf
id opsadmin >/dev/null 2>&1 || useradd --create-home --shell /bin/bash --groups sudo opsadmin
echo 'opsadmin:mdpilot-admin-pw' | chpasswd
echo 'tester:mdpilot-tester-pw' | chpasswd

orig_max=$(limit_max) orig_min=$(limit_min)
md=md18
cleanup() {
    mcall ReleasePriority s cockpit-boost >/dev/null 2>&1 || true
    if [ -e /dev/$md ]; then
        mdadm --stop /dev/$md || true
        mdadm --zero-superblock "${DISKS[2]}" "${DISKS[3]}" || true
    fi
    echo "$orig_max" >/proc/sys/dev/raid/speed_limit_max
    echo "$orig_min" >/proc/sys/dev/raid/speed_limit_min
}
trap cleanup EXIT
echo 1000 >/proc/sys/dev/raid/speed_limit_max
MD_SIZE=262144 md_create $md 1 "${DISKS[2]}" "${DISKS[3]}"
name_on_bus || systemctl start mdpilot.service
wait_for 20 busctl --system introspect "$BUS_NAME" "$(array_path $md)" "$ARRAY" >/dev/null ||
    fail "$md not on the bus"
log "$md: $(cat /sys/block/$md/md/sync_action) $(cat /sys/block/$md/md/sync_completed)"
systemctl start cockpit.socket
wait_for 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9090' || fail "nothing listens on port 9090"

# lease_line HOLDER: the guest's view of a lease, one line.
lease_line() {
    local l s
    l=$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" Leases | tr '\n' ' ')
    s=$(mdpilot policy show 2>&1 | grep -F "$1" | tr '\n' ' ' || true)
    if [[ $l == *"\"id\" s \"$1\""* ]] && [ -n "$s" ] && [ "$(limit_min)" -ge 100000 ]; then
        echo "LEASE OK speed_limit_min $(limit_min); policy show: $s"
    else
        echo "LEASE MISSING Leases: $l; policy show: $s; speed_limit_min $(limit_min)"
    fi
}
exec 3<>"$ctl"
stty raw -echo 115200 <&3
verdict= heard=
t0=$(date +%s)
echo "READY $md" >&3
while [ -z "$verdict" ]; do
    if ! read -r -t 3 line <&3; then
        [ $(($(date +%s) - t0)) -lt $((900 * $(arg mdpilot.timescale || echo 1))) ] || break
        # Until the host answers: it may have connected after the first READY.
        [ -n "$heard" ] || echo "READY $md" >&3
        continue
    fi
    heard=1
    line=${line%$'\r'}
    # A byte may be lost on the line (no flow control): the keyword is looked for anywhere.
    case $line in
        *"LEASE? "*)
            r=$(lease_line "${line#*LEASE? }")
            log "$r"
            echo "$r" >&3
            ;;
        *"DONE "*) verdict=${line#*DONE } ;;
        *) log "host said: $line" ;;
    esac
done
exec 3>&-
log "$md at the end: $(cat /sys/block/$md/md/sync_action) $(cat /sys/block/$md/md/sync_completed)"
info "cockpit page driven from the host for $(($(date +%s) - t0)) s"
# Cockpit's records, whatever its version calls its units (337: cockpit-session@, cockpit-wsinstance-http).
[ "$verdict" = PASS ] || journalctl -b --no-pager -o short-monotonic | grep -Ei 'cockpit|pam_unix|polkit' | tail -n 40 || true
case $verdict in
    PASS) ;;
    SKIP*) skip "host: ${verdict#SKIP }" ;;
    FAIL*) fail "host: ${verdict#FAIL }" ;;
    *) fail "no verdict from the host driver (tests/debian/cockpit-host) within 900 s" ;;
esac

# vm-timeout: 240
# The installer udeb's own files (unpacked under /udeb by tests/vm/build from
# MDPILOT_UDEB) run d-i's flow on a fresh raid1 with no D-Bus at all, as the stock Debian 12
# installer runs them (tests/di boots that installer itself):
#   1. partman's start runs init.d/05mdpilot: partman-crypto's /bin/blockdev-wipe (a stand-in
#      file here) becomes a link to mdpilot, and the installer lease is taken: speed_limit_min 0,
#      speed_limit_max as it was;
#   2. partman-md's `speed_limit_max := speed_limit_min` before `mdadm --create`, then the
#      partman restart at the end of its menu: 05mdpilot puts the max back;
#   3. partman-crypto's wipe runs that link with `-s 65536 /dev/md0` and reads one `*` per
#      1/1000 over a fifo: 1000 stars, exit 0, md0 zeroed;
#   4. finish-install's 15-mdpilot-restore gives the admin's limits back and leaves no lease.
# The udeb binary has no `serve` (built without D-Bus); no mdpilot service runs in this scenario.
[ -x /udeb/usr/bin/mdpilot ] || skip "no udeb in the guest (set MDPILOT_UDEB, as tests/run does)"
need_disks 2
U=/udeb/usr/bin/mdpilot
ORIG_MIN=1000
ORIG_MAX=200000
set_limits "$ORIG_MIN" "$ORIG_MAX"
info "udeb binary: $(stat -c %s "$U") bytes"
if "$U" serve --help >/dev/null 2>&1; then fail "the udeb binary has a serve subcommand"; fi
bus_has_name && fail "an mdpilot service owns $BUS_NAME during the installer flow"
# d-i's PATH, with the udeb's /usr/bin first (as when the udeb is unpacked into the installer).
export PATH=/udeb/usr/bin:$PATH
[ "$(command -v mdpilot)" = "$U" ] || fail "mdpilot on PATH is $(command -v mdpilot), not the udeb's"
[ "$(readlink -f /udeb/usr/bin/blockdev-wipe)" = "$U" ] || fail "the udeb's blockdev-wipe is not a link to its mdpilot"

MD_SIZE=512M
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
dirty /dev/md0 64

# 1. partman's start: the hook, with partman-crypto's wiper at a stand-in path and the
# installer's (unpatched) partman scripts absent.
mkdir -p /tmp/di-bin /tmp/di-partman
printf '#!/bin/sh\nexit 1\n' >/tmp/di-bin/blockdev-wipe
chmod 0755 /tmp/di-bin/blockdev-wipe
export MDPILOT=$U MDPILOT_WIPER=/tmp/di-bin/blockdev-wipe MDPILOT_PARTMAN_DIR=/tmp/di-partman
export MDPILOT_PARTMAN_HOOK=/udeb/lib/partman/init.d/05mdpilot
partman_start() { sh "$MDPILOT_PARTMAN_HOOK" 2>>/tmp/hook.err || fail "05mdpilot exited non-zero: $(cat /tmp/hook.err)"; }
partman_start
assert_eq "$(readlink /tmp/di-bin/blockdev-wipe)" "$U" "/bin/blockdev-wipe after partman's start"
[ -x /tmp/di-bin/blockdev-wipe.partman-crypto ] || fail "partman-crypto's wiper was not kept"
assert_eq "$(limit_min)" 0 "speed_limit_min after partman's start"
assert_eq "$(limit_max)" "$ORIG_MAX" "speed_limit_max after partman's start"

# 2. partman-md's write before mdadm --create, and the partman restart after its menu.
cat /proc/sys/dev/raid/speed_limit_min >/proc/sys/dev/raid/speed_limit_max
partman_start
assert_eq "$(limit_max)" "$ORIG_MAX" "speed_limit_max after partman-md's menu"

# 3. partman-crypto's crypto_wipe_device, by the absolute path the installer uses.
crypto_wipe /tmp/di-bin/blockdev-wipe /dev/md0
assert_eq "$WIPE_RC" 0 "udeb blockdev-wipe exit status"
assert_eq "$WIPE_STARS" 1000 "number of * lines"
assert_eq "$WIPE_OTHER" 0 "number of other lines on stdout"
echo 3 >/proc/sys/vm/drop_caches
is_zero /dev/md0 64 || fail "md0 does not read back as zeros after the udeb's blockdev-wipe"
assert_eq "$(limit_min)" 0 "speed_limit_min during the install (the lease outlives the wipe)"

# 4. finish-install
sh /udeb/usr/lib/finish-install.d/15-mdpilot-restore 2>/tmp/fin.err || fail "15-mdpilot-restore exited non-zero"
cat /tmp/fin.err
assert_eq "$(limit_min)" "$ORIG_MIN" "speed_limit_min after finish-install"
assert_eq "$(limit_max)" "$ORIG_MAX" "speed_limit_max after finish-install"
leases=$("$U" policy show --json | jq '.leases | length')
assert_eq "$leases" 0 "leases after finish-install"
info "udeb installer flow: 05mdpilot linked the wiper, min 0, max kept across partman-md's write, blockdev-wipe 1000 stars exit 0 md0 zeroed, finish-install restored $ORIG_MIN/$ORIG_MAX, no D-Bus"

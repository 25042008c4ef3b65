#!/bin/bash
# Runs in the booted Debian guest as mdpilot-tests.service (after multi-user.target): runs each
# scenario named by `mdpilot.scenario=a,b` on the kernel command line (all when absent; `shell`
# runs none and leaves the guest up; a name from tests/debian/bench/ runs that bench step), in
# order and in the same system (a later scenario finds what an earlier one installed), prints
# its log between `@@BEGIN name` / `@@END name` on the console,
# and writes one line per scenario
#   RESULT <name> PASS|FAIL|SKIP <seconds>s [reason]
#   INFO <name> <text>
# to the results disk /dev/vda, which the host reads back, then powers off.
# A scenario's exit status: 0 pass, 77 (or a /tmp/t-skip file) skip, anything else fail; its own
# time limit is a `# vm-timeout: SECONDS` line (default 120).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PAGER=cat SYSTEMD_PAGER=cat SYSTEMD_COLORS=0
T=/usr/lib/mdpilot-tests
# arg, result_line (shared with tests/vm/guest/harness.sh).
GUEST_STATE=/tmp/t
source $T/common.sh
echo "@@BOOTED $(cut -d' ' -f1 /proc/uptime)"
echo "@@BOOT multi-user.target at $(systemctl show -p ActiveEnterTimestampMonotonic --value multi-user.target | awk '{printf "%.1f", $1 / 1e6}')s"
list=$(arg mdpilot.scenario || true)
[ "$list" = shell ] && exit 0
[ -n "$list" ] || list=$(cd $T/scenarios && ls ./*.sh | sed 's|^\./||; s|\.sh$||' | tr '\n' ',')

results=/run/t-results
: >"$results"
for name in ${list//,/ }; do
    script=$T/scenarios/$name.sh
    [ -f "$script" ] || script=$(ls $T/scenarios/*-"$name".sh 2>/dev/null | head -1)
    # The benches' guest steps (tests/debian/bench/), run only when named.
    [ -f "$script" ] || script=$T/bench/$name.sh
    if [ ! -f "$script" ]; then
        echo "RESULT $name FAIL 0s no such scenario" >>"$results"
        continue
    fi
    name=$(basename "$script" .sh)
    tmo=$(sed -n 's/^# vm-timeout: *\([0-9]*\).*/\1/p' "$script" | head -1)
    # mdpilot.timescale=N (tests/debian/run's MDPILOT_DEBIAN_TIME_SCALE): N times every limit.
    tmo=$((${tmo:-120} * $(arg mdpilot.timescale || echo 1)))
    rm -rf /tmp/t-skip /tmp/t-fail /tmp/t-info /tmp/work
    mkdir -p /tmp/work
    # The scenarios restart the service far more often than an admin does (14 to 16 restart it
    # twice each within seconds): systemd's start limit (5 starts in 10 s) is the test's, not
    # the product's, so each scenario starts with the counter cleared.
    systemctl reset-failed mdpilot.service 2>/dev/null || true
    echo "@@BEGIN $name"
    t0=$(date +%s.%N)
    (cd /tmp/work && T=$T timeout -k 5 "$tmo" /bin/bash -eu -o pipefail -c \
        'source "$T/lib.sh"; source "$1"' scenario "$script" </dev/null 2>&1)
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    echo "@@END $name rc=$rc"
    line=$(result_line "$rc" "$secs" "$tmo")
    echo "RESULT $name $line" >>"$results"
    [ -f /tmp/t-info ] && sed "s/^/INFO $name /" /tmp/t-info >>"$results"
    echo "@@RESULT $name $line"
    # On the results disk after every scenario: a guest killed at the host's time limit still
    # reports the scenarios it finished.
    dd if="$results" of=/dev/vda bs=64K conv=fsync status=none
done
echo "END" >>"$results"
dd if="$results" of=/dev/vda bs=64K conv=fsync status=none
# Past inhibitors: udisksd holds a block inhibitor ("mdraid-check-job") while any md check runs,
# and systemctl, its output on the console (a TTY, so "interactive"), honours it even for root
# in Debian 13: after a step that leaves a check running (benches/peers' first boot) the plain
# poweroff was refused ("Operation inhibited by Disk Manager") and the guest ran to the host's cap.
# With the inhibitor held, logind also asks polkit before it ignores it, even for root ("Call to
# PowerOff failed: Interactive authentication required"); then the poweroff goes to systemd
# itself, past logind, as `systemctl poweroff` does where logind is absent. Units still stop in
# order (mdpilot.service gets its SIGTERM).
systemctl --no-block --check-inhibitors=no poweroff ||
    systemctl --no-block start poweroff.target --job-mode=replace-irreversibly

# The guest step of benches/peers: mdpilot beside the md tools Debian ships, all at once on the
# same arrays, at their packaged defaults: udisksd (udisks2), `mdadm --monitor` as mdmonitor.service
# with a PROGRAM that stamps each event, prometheus-node-exporter (its md collector), and
# mdpilot.service (the .deb) with `mdpilot monitor --events` beside it.
# Observers (peers_observe.py) stamp what each tool shows in CLOCK_MONOTONIC; everything raw goes
# to /run/peers, which is written as a tar archive to the disk with serial `peers-out`; the host
# (benches/peers) reduces it to the tables.
# Data disks are found by their serials (virtio-mdpilot-data0..7), never by kernel name.
# Phases (kernel command line `peers.trials=N peers.idle=SECONDS peers.phases=a,b`, all by default):
#   latency  N trials of `mdadm --fail` on md0 (RAID1, internal bitmap; its two members in turn),
#            each followed by --remove and --re-add (a bitmap recovery) and a random pause
#            (3 to 53 s) before the next;
#   progress a full recovery of md0 then a check, at 1000 KiB/s, with md/sync_completed sampled
#            every 0.1 s beside every tool's progress;
#   idle     four arrays, nothing happening, no scrapes: each daemon's counters before and after;
#   hard     two arrays on shared disks both checking (one `delayed`), a RAID5 reshape, an array
#            stopped while it resyncs, an array created while the tools run: a snapshot of every
#            tool's view and the kernel's at each point;
#   checks   (the first of two boots; the second is peers-again.sh) two RAID1 on partitions of
#            the same two disks checked by Debian's mdcheck (mdcheck_start.service), two more on
#            two other disks by mdpilot's schedule, mismatches planted in each; the state each
#            keeps is stopped as a shutdown stops it, then saved to the disk with serial
#            `peers-state` (the guest's root is an initramfs; a real machine's /var/lib persists)
#            and the guest reboots on the same disks.
# vm-timeout: 7200
P=/run/peers
OBS=$T/bench/peers_observe.py
mkdir -p $P
trials=$(arg peers.trials || echo 20)
idle_s=$(arg peers.idle || echo 600)
d() { readlink -f "/dev/disk/by-id/virtio-mdpilot-data$1"; }
out_disk=/dev/disk/by-id/virtio-peers-out
[ -b "$out_disk" ] || fail "no output disk (serial peers-out)"
pids=()
# flush: what /run/peers holds so far onto the output disk (after every phase, so a run cut
# short still leaves its finished phases to the host).
flush() {
    tar -C $P -cf /tmp/peers-out.tar . || echo "@@PEERS tar failed"
    dd if=/tmp/peers-out.tar of="$(readlink -f "$out_disk")" bs=1M conv=fsync status=none || echo "@@PEERS dd failed"
    echo "@@PEERS wrote $(stat -c %s /tmp/peers-out.tar) bytes of raw logs to $(readlink -f "$out_disk")"
}
finish() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    dmesg >$P/dmesg.txt 2>/dev/null || true
    journalctl --no-pager -o short-monotonic >$P/journal.txt 2>/dev/null || true
    flush
}
trap finish EXIT
mark() { echo "$EPOCHREALTIME $*" >>$P/marks.log; log "mark: $*"; }
clock() { python3 $OBS clock >>$P/clock.jsonl; }

# ---------------------------------------------------------------- the tools, at their defaults
# Without a .deb in the guest (benches/peers with MDPILOT_DEB=none: a dry run of the peers alone).
have_mdpilot=1
[ -f "$DEB" ] || have_mdpilot=0
setup_tools() {
    if [ $have_mdpilot = 1 ]; then
        dpkg -i "$DEB" >$P/dpkg.log 2>&1 || fail "dpkg -i mdpilot.deb failed: $(tail -3 $P/dpkg.log)"
    fi
    mkdir -p /etc/mdpilot/config.d
    printf '[metrics]\nlisten = "127.0.0.1:9163"\n' >/etc/mdpilot/config.d/50-peers.toml
    # mdadm --monitor's alert command: stamps each call ($EPOCHREALTIME: no fork before it).
    cat >/usr/local/sbin/peers-mdmonitor-program <<'EOF'
#!/bin/bash
echo "$EPOCHREALTIME $*" >>/run/peers/mdmonitor.log
EOF
    chmod 755 /usr/local/sbin/peers-mdmonitor-program
    echo "PROGRAM /usr/local/sbin/peers-mdmonitor-program" >>/etc/mdadm/mdadm.conf
    # tests/debian/build masks Debian's md timers for the scenarios' quiet boots: undone here.
    rm -f /etc/systemd/system/mdmonitor-oneshot.timer /etc/systemd/system/mdcheck_start.timer \
        /etc/systemd/system/mdcheck_continue.timer
    systemctl daemon-reload
    {
        echo "kernel $(uname -r)"
        dpkg-query -W -f '${Package} ${Version}\n' udisks2 mdadm prometheus-node-exporter mdpilot systemd || true
        cat /etc/debian_version
        systemctl cat mdmonitor.service 2>&1 | grep -E '^(Exec|Environment)' || true
        cat /etc/default/prometheus-node-exporter 2>/dev/null | grep -v '^#' | grep . || true
        systemctl list-unit-files 'mdcheck*' 'mdmonitor*' --no-legend 2>&1 || true
        ls /usr/share/mdadm/ /etc/cron.d/ 2>&1 || true
    } >$P/versions.txt
}
start_tools() {
    local mine=
    [ $have_mdpilot = 0 ] || mine=mdpilot.service
    # restart: the package's postinst may have started mdpilot before its metrics setting.
    systemctl restart udisks2.service prometheus-node-exporter.service $mine ||
        fail "a peer did not start: $(systemctl --failed --no-legend)"
    systemctl restart mdmonitor.service || fail "mdmonitor.service did not start: $(systemctl status mdmonitor.service --no-pager 2>&1 | tail -5)"
    [ $have_mdpilot = 0 ] || wait_for 120 name_on_bus || fail "mdpilot not on the bus"
    wait_for 120 busctl --system status org.freedesktop.UDisks2 >/dev/null 2>&1 || fail "udisksd not on the bus"
    for u in udisks2 mdmonitor prometheus-node-exporter ${mine%.service}; do
        echo "$u $(systemctl show -p MainPID --value $u.service)"
    done >$P/pids.txt
    cat $P/pids.txt
}
start_observers() {
    python3 $OBS dbus >>$P/dbus.jsonl 2>>$P/observer.err &
    pids+=($!)
    if [ $have_mdpilot = 1 ]; then
        (mdpilot monitor --events | python3 $OBS lines mdpilot-events) >>$P/events.jsonl 2>>$P/observer.err &
        pids+=($!)
    fi
    python3 $OBS scrape node_exporter 'http://127.0.0.1:9100/metrics?collect[]=mdadm' >>$P/scrape-node.jsonl 2>>$P/observer.err &
    pids+=($!)
    python3 $OBS scrape mdpilot-metrics http://127.0.0.1:9163/metrics >>$P/scrape-mdpilot.jsonl 2>>$P/observer.err &
    pids+=($!)
    wait_for 400 grep -q ready $P/dbus.jsonl || fail "the D-Bus observer did not start"
    wait_for 300 test -s $P/scrape-node.jsonl || fail "no scrape"
}
stop_observers() {
    local p
    for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
    pids=()
}
# mdc NAME LEVEL SIZE_KIB OPTS DISK...: mdadm --create (OPTS one word, `-` for none).
mdc() {
    local name=$1 level=$2 size=$3 opts=$4
    shift 4
    [ "$opts" != - ] || opts=
    # shellcheck disable=SC2086 # OPTS is one option or none
    mdadm --create "/dev/$name" --run --quiet --metadata=1.2 --level="$level" --raid-devices=$# \
        --size="$size" $opts "$@" || fail "mdadm --create /dev/$name failed"
    udevadm settle --timeout=20 || true
}
# snapshot LABEL: every tool's view and the kernel's, one JSON object in $P/snap-LABEL.json.
snapshot() {
    mark "snapshot $1"
    python3 $OBS snapshot "$1" >"$P/snap-$1.json" 2>>$P/observer.err || true
}

# ---------------------------------------------------------------- 1. event latency
# seen KEY: lines so far that show md0's failure in one tool's log.
seen() {
    case $1 in
        udisks) grep -E '"Degraded": [1-9]' $P/dbus.jsonl | grep -c '"tool": "udisks"' ;;
        mdpilot) grep -E '"Degraded": [1-9]' $P/dbus.jsonl | grep -c '"tool": "mdpilot"' ;;
        events) grep -c '"line": "Fail md0' $P/events.jsonl ;;
        mdmonitor) grep -c 'Fail /dev/md0' $P/mdmonitor.log ;;
        node) grep -cE '"failed": \{[^}]*"md0": [1-9]' $P/scrape-node.jsonl ;;
        metrics) grep -cE '"failed": \{[^}]*"md0": [1-9]' $P/scrape-mdpilot.jsonl ;;
    esac
}
KEYS="udisks mdpilot events mdmonitor node metrics"
[ $have_mdpilot = 1 ] || KEYS="udisks mdmonitor node"
declare -A before
all_seen() {
    local k
    for k in $KEYS; do [ "$(seen "$k" || true)" -gt "${before[$k]}" ] || return 1; done
}
whole() { [ "$(cat /sys/block/md0/md/degraded)" = 0 ] && idle md0; }
latency() {
    local i k m
    touch $P/mdmonitor.log
    for i in $(seq "$trials"); do
        # The two members in turn. mdadm --monitor compares each read (every 60 s) with its last:
        # the same member failed again before it read the repair would look unchanged to it (a
        # failure merged away); the other member's failure is a change it reports.
        m=$(d $((i % 2)))
        for k in $KEYS; do before[$k]=$(seen "$k" || true); done
        mark "fail $i start"
        mdadm --fail /dev/md0 "$m" >/dev/null 2>&1 || fail "mdadm --fail failed"
        mark "fail $i done"
        # mdadm --monitor wakes every MONITORDELAY (60 s by default): a window of 100 s.
        wait_for 100 all_seen || log "trial $i: not every tool showed the failure within 100 s"
        mark "fail $i seen"
        mdadm /dev/md0 --remove "$m" >/dev/null 2>&1 || true
        mdadm /dev/md0 --re-add "$m" >/dev/null 2>&1 || mdadm /dev/md0 --add "$m" >/dev/null || fail "re-add failed"
        wait_for 300 whole || fail "md0 not whole again after trial $i: $(cat /proc/mdstat)"
        mark "fail $i whole"
        # The trial ended at mdadm --monitor's read: the next failure comes at a random phase of
        # its 60 s cycle (0 to 53 s on), not always just after a read (its worst case).
        sleep $((3 + RANDOM % 51))
    done
}

# ---------------------------------------------------------------- 2. progress fidelity
# progress_sync KIND: md0's sync of that kind (recovery: a wiped member added back; check) at
# 1000 KiB/s (md/sync_speed_max: long enough for every tool's updates), from start to end.
progress_sync() {
    local m=$(d 1)
    busy() { ! idle md0; }
    if [ "$1" = recovery ]; then
        mdadm /dev/md0 --fail "$m" >/dev/null 2>&1 || fail "mdadm --fail (progress) failed"
        mdadm /dev/md0 --remove "$m" >/dev/null 2>&1 || fail "mdadm --remove (progress) failed"
        # Wiped: added back as a new member, a full recovery despite md0's bitmap.
        mdadm --zero-superblock "$m" || fail "mdadm --zero-superblock $m failed"
        sleep 5
        mark "progress recovery start"
        mdadm /dev/md0 --add "$m" >/dev/null || fail "mdadm --add (progress) failed"
    else
        mark "progress check start"
        echo check >/sys/block/md0/md/sync_action
    fi
    wait_for 20 busy || log "progress: md0's $1 did not start: $(cat /proc/mdstat)"
    wait_for 600 whole || fail "md0's $1 did not end in 600 s: $(cat /proc/mdstat)"
    mark "progress $1 end"
}
progress() {
    echo 1000 >/sys/block/md0/md/sync_speed_max
    progress_sync recovery
    sleep 5
    progress_sync check
    # mdadm --monitor's last progress word (RebuildFinished) comes at its next read.
    sleep 65
    mark "progress end"
    echo system >/sys/block/md0/md/sync_speed_max
}

# ---------------------------------------------------------------- 2. idle cost
counters() {
    local u pid t cs=0 f v
    while read -r u pid; do
        [ -d "/proc/$pid" ] || continue
        t=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        cs=0
        # Summed over the threads (a thread's switches are in its own status; ended threads'
        # are lost, which the thread counts below would show).
        for f in /proc/$pid/task/*/status; do
            v=$(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s + 0}' "$f" 2>/dev/null) || true
            cs=$((cs + ${v:-0}))
        done
        echo "$1 $u $pid ticks=$t ctxt=$cs threads=$(ls /proc/$pid/task | wc -l) $(grep -E '^(VmHWM|VmRSS)' /proc/$pid/status | tr -s ' \t\n' ' ')"
    done <$P/idle-pids.txt >>$P/idle.txt
}
idle_cost() {
    local mp=
    mdc md1 1 65536 --assume-clean "$(d 2)" "$(d 3)"
    mdc md2 1 65536 --assume-clean "$(d 4)" "$(d 5)"
    mdc md3 1 65536 --assume-clean "$(d 6)" "$(d 7)"
    cp $P/pids.txt $P/idle-pids.txt
    # mdpilot's own counterpart of `mdadm --monitor`, a process of its own.
    if [ $have_mdpilot = 1 ]; then
        mdpilot monitor --events >>$P/idle-events.txt 2>&1 &
        mp=$!
        echo "mdpilot-monitor-events $mp" >>$P/idle-pids.txt
    fi
    sleep 20
    echo "clk_tck $(getconf CLK_TCK)" >$P/idle.txt
    mark "idle start"
    counters start
    sleep "$idle_s"
    counters end
    mark "idle end"
    [ -z "$mp" ] || kill "$mp" 2>/dev/null || true
    cat $P/idle.txt
}

# ---------------------------------------------------------------- 3. hard cases
# mbr DISK: three primary partitions of 300 MiB (MS-DOS table written by hand: no fdisk here).
mbr() {
    python3 - "$1" <<'PY'
import struct, sys
t = bytearray(512)
for i in range(3):
    start, n = 2048 + i * 614400, 614400
    t[446 + 16 * i:462 + 16 * i] = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0xFD, b"\0\0\0", start, n)
t[510:512] = b"\x55\xaa"
with open(sys.argv[1], "r+b") as f:
    f.write(t)
PY
    # Just after `mdadm --stop`, udev and udisksd still hold the disk open (BLKRRPART: busy):
    # retried, then partx adds the partitions one by one, which works on a busy disk.
    local i
    udevadm settle --timeout=20 || true
    for i in 1 2 3 4 5; do blockdev --rereadpt "$1" 2>/dev/null && break; sleep 2; done
    [ -b "${1}3" ] || partx -a "$1" 2>/dev/null || partx -u "$1" || true
    udevadm settle --timeout=20 || true
    [ -b "${1}3" ] || fail "no partitions on $1 after writing its table"
}
hard() {
    local a
    mdadm --stop /dev/md1 /dev/md2 /dev/md3 >/dev/null 2>&1 || true
    mdadm --zero-superblock "$(d 2)" "$(d 3)" "$(d 4)" "$(d 5)" "$(d 6)" "$(d 7)" 2>/dev/null || true
    mbr "$(d 6)"
    mbr "$(d 7)"
    local s6=$(d 6) s7=$(d 7)
    # (a) two arrays on the same two disks, both asked to check: md serialises them, one delayed.
    mdc md10 1 262144 --assume-clean "${s6}1" "${s7}1"
    mdc md11 1 262144 --assume-clean "${s6}2" "${s7}2"
    for a in md10 md11; do echo 2000 >/sys/block/$a/md/sync_speed_max; done
    mark "shared start"
    echo check >/sys/block/md10/md/sync_action
    echo check >/sys/block/md11/md/sync_action
    sleep 8
    cat /proc/mdstat
    snapshot shared-delayed
    for a in md10 md11; do echo idle >/sys/block/$a/md/sync_action; done
    # (b) a reshape: RAID5 of three members grown to four.
    mdc md12 5 65536 --assume-clean "$(d 4)" "$(d 5)" "${s6}3"
    echo 1000 >/sys/block/md12/md/sync_speed_max
    mdadm /dev/md12 --add "${s7}3" >/dev/null
    mark "reshape start"
    mdadm --grow /dev/md12 --raid-devices=4 --backup-file=$P/md12.backup >$P/grow.log 2>&1 || log "grow: $(cat $P/grow.log)"
    sleep 8
    cat /proc/mdstat
    snapshot reshape
    # (c) an array stopped while it resyncs. md's own limit is lowered first: set on md13 after
    # its creation (and udev's settle), it came after the whole 256 MiB resync.
    echo 1000 >/proc/sys/dev/raid/speed_limit_max
    mdc md13 1 262144 - "$(d 2)" "$(d 3)"
    sleep 6
    snapshot resyncing
    mark "stop md13"
    mdadm --stop /dev/md13 >/dev/null || log "mdadm --stop md13 failed"
    echo 200000 >/proc/sys/dev/raid/speed_limit_max
    sleep 8
    snapshot stopped
    # (d) an array created while the tools run (the latency of its appearance, from the marks).
    mdadm --zero-superblock "$(d 2)" "$(d 3)" 2>/dev/null || true
    mark "create md14"
    mdc md14 1 65536 --assume-clean "$(d 2)" "$(d 3)"
    mark "created md14"
    sleep 10
    snapshot created
    mdadm --stop /dev/md10 /dev/md11 /dev/md12 /dev/md14 >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------- 5. checks (first boot)
# plant ARRAY PARTITION: 64 KiB of noise written past md into one member at 100 MiB, so the
# array's check finds mismatches (the result each tool is asked for afterwards).
plant() {
    dd if=/dev/urandom of="$2" bs=64K count=1 seek=1600 oflag=direct conv=notrunc status=none ||
        fail "planting a mismatch in $1 failed"
}
uuid_of() { mdadm --detail --export "/dev/$1" | sed -n 's/^MD_UUID=//p'; }
state() {
    mark "state $1"
    python3 $OBS state "$1" >>$P/state.jsonl 2>>$P/observer.err || true
}
# stop_timed UNIT: `systemctl stop` as a shutdown does it, timed (how long it holds the reboot).
stop_timed() {
    local t0=$EPOCHREALTIME
    systemctl stop "$1" || log "systemctl stop $1 failed"
    echo "$1 $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')" >>$P/stop-times.txt
}
checks_first() {
    local s4=$(d 4) s5=$(d 5) s6=$(d 6) s7=$(d 7) p now
    mdadm --zero-superblock "${s6}1" "${s6}2" "${s6}3" "${s7}1" "${s7}2" "${s7}3" "$s4" "$s5" 2>/dev/null || true
    # Both tools' checks at the same speed, 500 KiB/s (a 256 MiB array in 9 minutes: mid-way at
    # the reboot): md's system-wide limit, and mdpilot's check_max below.
    echo 500 >/proc/sys/dev/raid/speed_limit_max
    echo system >/sys/block/md0/md/sync_speed_max
    # Debian's pair: md20, md21 on partitions 1 and 2 of disks 6 and 7 (hard() wrote the tables).
    mdc md20 1 262144 --assume-clean "${s6}1" "${s7}1"
    mdc md21 1 262144 --assume-clean "${s6}2" "${s7}2"
    plant md20 "${s6}1"
    plant md21 "${s7}2"
    # Debian's own unit, as its timer starts it (mdcheck --duration "6 hours"): it checks every
    # idle array there is, so mdpilot's pair is made only after it has started its checks.
    mark "checks mdcheck start"
    systemctl start --no-block mdcheck_start.service
    mdcheck_started() { [ "$(ls /var/lib/mdcheck/MD_UUID_* 2>/dev/null | wc -l)" -ge 2 ]; }
    wait_for 60 mdcheck_started || log "mdcheck recorded no position: $(systemctl status mdcheck_start.service --no-pager 2>&1 | tail -5)"
    sleep 20
    state mdcheck-running
    # mdpilot's pair on disks 4 and 5, checked by its schedule (a window opening this second).
    mbr "$s4"
    mbr "$s5"
    mdc md22 1 262144 --assume-clean "${s4}1" "${s5}1"
    mdc md23 1 262144 --assume-clean "${s4}2" "${s5}2"
    plant md22 "${s4}1"
    plant md23 "${s5}2"
    for p in md20 md21 md22 md23; do echo "$p $(uuid_of $p)"; done >$P/checks-uuids.txt
    sleep 1
    now=$(date +%H:%M:%S)
    # include: the pair by name and UUID (names change at the next boot); max_concurrent: mdpilot counts
    # every running check, Debian's too, against its bound (default 1), which would hold its
    # schedule until mdcheck is done; its shared-disk rule still runs one of the pair at a time.
    cat >/etc/mdpilot/config.d/60-peers-checks.toml <<T
[check]
schedule = "*-*-* $now"
window = "6h"
min_age_days = 0
max_concurrent = 8
check_max = 500
check_max_working = 500
include = ["md22", "md23", "$(uuid_of md22)", "$(uuid_of md23)"]
T
    mark "checks mdpilot schedule"
    systemctl restart mdpilot.service || fail "mdpilot did not restart with the check schedule"
    mine_running() { [ "$(cat /sys/block/md22/md/sync_action)" = check ] || [ "$(cat /sys/block/md23/md/sync_action)" = check ]; }
    wait_for 90 mine_running || log "mdpilot's schedule started no check: $(journalctl -u mdpilot --no-pager | tail -5)"
    sleep 40
    state before-reboot
    # What the shutdown does to each: the units are stopped (timed), then the state saved.
    mark "checks stop"
    stop_timed mdcheck_start.service
    stop_timed mdpilot.service
    state stopped
    mark "checks saved"
    tar -C / -cf /tmp/peers-state.tar var/lib/mdcheck var/lib/mdpilot etc/mdpilot/config.d run/peers/checks-uuids.txt
    dd if=/tmp/peers-state.tar of="$(readlink -f /dev/disk/by-id/virtio-peers-state)" bs=1M conv=fsync status=none ||
        fail "saving the state to the state disk failed"
}

# phase NAME: runs the phase function NAME in a subshell, so a phase that fails (its reason in
# the log and the step's verdict) leaves the later ones their run; its time goes to the results.
# (Inside, -e is off: a phase ends early only by `fail`.)
failed=
phase() {
    local t0=$(date +%s) rc=0
    ("$1") || rc=$?
    [ $rc = 0 ] || { log "phase $1 failed (exit $rc)"; failed="$failed $1"; }
    info "$1: $(($(date +%s) - t0)) s$([ $rc = 0 ] || echo ", FAILED")"
    flush
}
# sampler SECONDS FILE: md's own sync state every SECONDS into FILE until stop_sampler.
sampler() {
    python3 $OBS kernel "$1" >>"$P/$2" 2>>$P/observer.err &
    spid=$!
    pids+=($spid)
}
stop_sampler() { kill "$spid" 2>/dev/null || true; }

# wanted NAME: the phase is in `peers.phases` (all by default).
phases=$(arg peers.phases || echo latency,progress,idle,hard,checks)
wanted() { [[ ",$phases," == *",$1,"* ]]; }

setup_tools
mdc md0 1 65536 --bitmap=internal "$(d 0)" "$(d 1)"
wait_for 600 idle md0 || fail "md0's first resync did not end"
start_tools
clock
start_observers
snapshot start
! wanted latency || phase latency
if wanted progress; then
    sampler 0.1 kernel-progress.jsonl
    phase progress
    stop_sampler
fi
stop_observers
! wanted idle || phase idle_cost
start_observers
if wanted hard; then
    phase hard
    sleep 3
fi
stop_observers
clock
if wanted checks; then
    # (The hard cases wrote the partition tables of disks 6 and 7.)
    wanted hard || { mbr "$(d 6)"; mbr "$(d 7)"; }
    sampler 1 kernel-checks.jsonl
    phase checks_first
    stop_sampler
    clock
fi
[ -z "$failed" ] || fail "phases failed:$failed"

# The guest step of benches/check-yield: how much a check costs the machine's own I/O, four ways
# in one boot on the same array and the same foreground load:
#   none      no check (the baseline);
#   default   a check at md's defaults (`echo check > md/sync_action`, sync_speed_max `system`);
#   fixed     a check at a fixed low limit, as admins tune by hand (md/sync_speed_max
#             `cy.fixed`, default 5000 KiB/s);
#   throttle  `mdpilot check start` under `[check] pressure_target = "full 5%..10%"` (the .deb's
#             service, its shipped unit).
# The array: RAID1 of the two data disks (sparse on the host), --assume-clean, ext4 on it
# (lazy init, mounted noinit_itable: no background writes of its own). The foreground: fio,
# 4 KiB random reads and writes (70/30) at a fixed rate (`cy.iops` reads + 40 % as many writes
# per second, O_DIRECT, fio's engine `cy.engine`: psync by default, blocking pread/pwrite as
# most programs do; libaio at depth 8 waits in io_getevents, which the kernel's io pressure
# does not count) on a 256 MiB file, in bursts: `cy.bursts` bursts of
# `cy.on` seconds, each followed by a gap of `cy.off` seconds, after a lead of `cy.off` s in
# which the check gets going. Each way's check starts from the array's start and is cancelled
# at the way's end (mdpilot's through `mdpilot check cancel`).
# Raw output goes to /run/cy, written as a tar archive to the disk with serial `cy-out`:
#   <way>-samples.tsv  one line a second: time, phase (lead/burst/gap), the check's position
#                      (/proc/mdstat, KiB), md/sync_speed, md/sync_speed_max (KiB/s),
#                      /proc/pressure/io full and some avg10 (%), md/sync_completed
#   <way>-throttle.jsonl  the service's decisions (/run/mdpilot/check-throttle.json), throttle only
#   <way>-b<N>.json    fio's json; <way>-b<N>_clat.1.log fio's per-I/O completion latencies
#   versions.txt, marks.log, journal.txt, dmesg.txt
# The host (benches/check_yield_report.py) reduces them.
# vm-timeout: 2400
CY=/run/cy
mkdir -p $CY
on_s=$(arg cy.on || echo 25)
off_s=$(arg cy.off || echo 25)
bursts=$(arg cy.bursts || echo 3)
iops=$(arg cy.iops || echo 100)
fixed=$(arg cy.fixed || echo 5000)
engine=$(arg cy.engine || echo psync)
# The kernel command line has no spaces in a word: `full_5%..10%`.
target=$(arg cy.target || echo full_5%..10%)
target=${target//_/ }
ways=$(arg cy.ways || echo none,default,fixed,throttle)
out_disk=/dev/disk/by-id/virtio-cy-out
[ -b "$out_disk" ] || fail "no output disk (serial cy-out)"
sampler=
flush() {
    tar -C $CY -cf /tmp/cy-out.tar . || echo "@@CY tar failed"
    dd if=/tmp/cy-out.tar of="$(readlink -f "$out_disk")" bs=1M conv=fsync status=none || echo "@@CY dd failed"
    echo "@@CY wrote $(stat -c %s /tmp/cy-out.tar) bytes to $(readlink -f "$out_disk")"
}
finish() {
    [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
    dmesg >$CY/dmesg.txt 2>/dev/null || true
    journalctl --no-pager -o short-monotonic -u mdpilot.service >$CY/journal.txt 2>/dev/null || true
    flush
}
trap finish EXIT
mark() { echo "$EPOCHREALTIME $*" >>$CY/marks.log; log "mark: $*"; }

need_disks 2
[ -f "$DEB" ] || fail "no mdpilot .deb in the guest"
command -v fio >/dev/null || fail "no fio in the guest (tests/debian/build flavor checkyield:fio,e2fsprogs)"
dpkg -i "$DEB" >$CY/dpkg.log 2>&1 || fail "dpkg -i mdpilot.deb failed: $(tail -3 $CY/dpkg.log)"
[ -r /proc/pressure/io ] || fail "this kernel has no /proc/pressure/io: the throttle would be the fixed check_max"
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --assume-clean \
    --bitmap=none "${DISKS[0]}" "${DISKS[1]}" || fail "mdadm --create failed"
udevadm settle --timeout=20 || true
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 /dev/md0 || fail "mkfs.ext4 failed"
mkdir -p /mnt/cy
mount -o noinit_itable /dev/md0 /mnt/cy || fail "mount failed"
{
    echo "kernel $(uname -r)"
    cat /etc/debian_version
    dpkg-query -W -f '${Package} ${Version}\n' mdpilot mdadm fio systemd e2fsprogs || true
    mdpilot --version 2>&1 || true
    echo "md0 $(cat /sys/block/md0/md/level) $(($(cat /sys/block/md0/size) / 2 / 1024)) MiB, bitmap none"
    echo "speed_limit_min $(cat /proc/sys/dev/raid/speed_limit_min) speed_limit_max $(cat /proc/sys/dev/raid/speed_limit_max)"
    nproc
    printf 'on_s %s off_s %s bursts %s iops %s fixed %s engine %s target %s\n' "$on_s" "$off_s" "$bursts" "$iops" "$fixed" "$engine" "$target"
} >$CY/versions.txt
# The foreground's file, written once (fio lays it out), then the same file for every way.
fio --name=layout --filename=/mnt/cy/fio.dat --size=256M --rw=write --bs=1M --direct=1 \
    --output=$CY/layout.txt --eta=never || fail "fio layout failed"
sync
mkdir -p /etc/mdpilot/config.d

# sample WAY: one line a second until killed (builtins only: no fork steals the guest's CPU).
sample() {
    local way=$1 t done completed speed max full some line
    while :; do
        # /proc/mdstat's position (KiB, md's curr_resync less what is in flight): md/sync_completed
        # moves only every 1/16 of the array or every few minutes.
        done=
        while read -r line; do
            case $line in *"check ="* | *"resync ="*) line=${line#*(}; done=${line%%/*} ;; esac
        done </proc/mdstat
        read -r completed _ </sys/block/md0/md/sync_completed || completed=
        read -r speed </sys/block/md0/md/sync_speed || speed=
        read -r max _ </sys/block/md0/md/sync_speed_max || max=
        full= some=
        while read -r line; do
            case $line in
                full*) full=${line#*avg10=}; full=${full%% *} ;;
                some*) some=${line#*avg10=}; some=${some%% *} ;;
            esac
        done </proc/pressure/io
        read -r phase <$CY/phase || phase=
        t=$EPOCHREALTIME
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$phase" "$done" "$speed" "$max" "$full" "$some" "$completed" >>"$CY/$way-samples.tsv"
        if [ "$way" = throttle ] && [ -r /run/mdpilot/check-throttle.json ]; then
            line=$(</run/mdpilot/check-throttle.json)
            printf '{"t":%s,"notes":%s}\n' "$t" "$line" >>"$CY/$way-throttle.jsonl"
        fi
        sleep 1
    done
}
# burst WAY N: fio for on_s seconds at the fixed rate.
burst() {
    local wr=$((iops * 4 / 10))
    fio --name="$1-b$2" --filename=/mnt/cy/fio.dat --size=256M --rw=randrw --rwmixread=70 --bs=4k \
        --direct=1 --ioengine="$engine" --iodepth=8 --rate_iops="$iops,$wr" --time_based --runtime="$on_s" \
        --norandommap --randrepeat=0 --percentile_list=50:99 --write_lat_log="$CY/$1-b$2" \
        --output-format=json --output="$CY/$1-b$2.json" --eta=never || fail "fio ($1 burst $2) failed"
}
start_check() {
    case $1 in
        none) ;;
        default) echo check >/sys/block/md0/md/sync_action ;;
        fixed)
            echo "$fixed" >/sys/block/md0/md/sync_speed_max
            echo check >/sys/block/md0/md/sync_action
            ;;
        throttle)
            systemctl start mdpilot.service || fail "mdpilot.service did not start"
            mdpilot check start md0 >$CY/throttle-start.txt 2>&1 || fail "mdpilot check start: $(cat $CY/throttle-start.txt)"
            ;;
    esac
}
stop_check() {
    case $1 in
        none) ;;
        throttle)
            mdpilot check cancel md0 >>$CY/throttle-start.txt 2>&1 || fail "mdpilot check cancel failed"
            systemctl stop mdpilot.service
            ;;
        *)
            echo idle >/sys/block/md0/md/sync_action
            echo system >/sys/block/md0/md/sync_speed_max
            ;;
    esac
    wait_for 60 idle md0 || fail "md0 not idle after the $1 way: $(cat /proc/mdstat)"
    # md's own record of the check's end; the next way starts from the array's start.
    echo 0 >/sys/block/md0/md/sync_min 2>/dev/null || true
}
run_way() {
    local way=$1 i
    echo lead >$CY/phase
    sync
    echo 3 >/proc/sys/vm/drop_caches
    sample "$way" &
    sampler=$!
    mark "$way start"
    start_check "$way"
    sleep "$off_s"
    for i in $(seq "$bursts"); do
        echo burst >$CY/phase
        mark "$way burst $i"
        burst "$way" "$i"
        echo gap >$CY/phase
        mark "$way gap $i"
        sleep "$off_s"
    done
    mark "$way end"
    [ "$way" != throttle ] || mdpilot check status --json md0 >$CY/throttle-status.json 2>&1 || true
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    sampler=
    stop_check "$way"
    flush
}

printf '[check]\npressure_target = "%s"\n' "$target" >/etc/mdpilot/config.d/50-cy.toml
# The service runs only in its own way: the others are md alone (the package's postinst started it).
systemctl stop mdpilot.service
for way in ${ways//,/ }; do
    case $way in none | default | fixed | throttle) ;; *) fail "unknown way $way" ;; esac
    [ "$(cat /sys/block/md0/md/sync_action)" = idle ] || fail "md0 not idle before the $way way"
    run_way "$way"
    info "$way: done, $(wc -l <"$CY/$way-samples.tsv") samples"
done
umount /mnt/cy
mdadm --stop /dev/md0 || true

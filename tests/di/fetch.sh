# Downloads for tests/di/run, cached under $cache keyed by version (sourced, bash).
#
# Sets: kernel initrd (the netboot images), udeb_dir (the installer's udebs), deb_dir (regular
# packages standing in for udebs the mirror does not serve), netboot_dir.
# Sources: the host's apt sources for the regular packages and the netboot images; a private
# apt directory with `bookworm main/debian-installer` for the udebs.

# The installer's udebs the scenario runs (kernel ABI of the netboot image: 6.1.0-50).
DI_UDEBS="partman-base partman-md partman-crypto partman-auto partman-auto-crypto di-utils
md-modules-6.1.0-50-amd64-di crypto-dm-modules-6.1.0-50-amd64-di scsi-modules-6.1.0-50-amd64-di"
# Missing as udebs on the mirror (404): mdadm-udeb, parted-udeb/libparted2-udeb (parted_server's
# library), cryptsetup-udeb. Their regular packages' files go into the second initrd.
# di-utils-mapdevfs (404 too) is stood in for by guest/standins/mapdevfs.
DI_DEBS="mdadm libparted2 libparted-fs-resize0 libdevmapper1.02.1 parted"

apt_q() { apt-get -q -o APT::Sandbox::User=root "$@"; }

fetch_all() {
    mkdir -p "$cache"
    local nb ver
    ver=$(apt-cache policy debian-installer-12-netboot-amd64 | sed -n 's/^ *Candidate: //p')
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || { apt_q update >&2; ver=$(apt-cache policy debian-installer-12-netboot-amd64 | sed -n 's/^ *Candidate: //p'); }
    netboot_dir=$cache/netboot-$ver
    if [ ! -f "$netboot_dir/ready" ]; then
        log "downloading debian-installer-12-netboot-amd64 $ver"
        rm -rf "$netboot_dir"
        mkdir -p "$netboot_dir"
        (cd "$netboot_dir" && apt_q download "debian-installer-12-netboot-amd64=$ver" >&2)
        dpkg-deb -x "$netboot_dir"/*.deb "$netboot_dir/x"
        rm -f "$netboot_dir"/*.deb
        touch "$netboot_dir/ready"
    fi
    nb=$netboot_dir/x/usr/lib/debian-installer/images/12/amd64/text/debian-installer/amd64
    kernel=$nb/linux
    initrd=$nb/initrd.gz
    [ -f "$kernel" ] && [ -f "$initrd" ] || die "no kernel/initrd in $netboot_dir"

    local a=$cache/apt
    mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/etc"
    local uri
    uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    uri=${uri:-http://deb.debian.org/debian}
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s bookworm main/debian-installer\n' "$uri" >"$a/etc/sources.list"
    local o=(-o "Dir::Etc::sourcelist=$a/etc/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$a/lists"
        -o "Dir::Cache=$a/cache" -o Dir::State::status=/dev/null)
    ls "$a/lists/"*debian-installer* >/dev/null 2>&1 || apt_q "${o[@]}" update >&2
    local key="" p v
    for p in $DI_UDEBS; do
        v=$(apt-cache "${o[@]}" policy "$p" | sed -n 's/^ *Candidate: //p')
        [ -n "$v" ] && [ "$v" != "(none)" ] || die "udeb $p not in the installer's index"
        key="$key $p=$v"
    done
    udeb_dir=$cache/udebs-$(echo "$key" | md5sum | cut -c1-12)
    if [ ! -f "$udeb_dir/ready" ]; then
        log "downloading udebs:$key"
        rm -rf "$udeb_dir"
        mkdir -p "$udeb_dir"
        # shellcheck disable=SC2086
        (cd "$udeb_dir" && apt_q "${o[@]}" download $key >&2)
        echo "$key" >"$udeb_dir/versions"
        touch "$udeb_dir/ready"
    fi
    key=""
    for p in $DI_DEBS; do
        v=$(apt-cache policy "$p" | sed -n 's/^ *Candidate: //p')
        key="$key $p=$v"
    done
    deb_dir=$cache/debs-$(echo "$key" | md5sum | cut -c1-12)
    if [ ! -f "$deb_dir/ready" ]; then
        log "downloading regular packages:$key"
        rm -rf "$deb_dir"
        mkdir -p "$deb_dir"
        # shellcheck disable=SC2086
        (cd "$deb_dir" && apt_q download $key >&2)
        echo "$key" >"$deb_dir/versions"
        touch "$deb_dir/ready"
    fi
}

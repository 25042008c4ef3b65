# Downloads for tests/di/run, cached under $cache keyed by version (sourced, bash).
#
# fetch_all RELEASE (12 or 13) sets: kernel initrd (the netboot images), udeb_dir (the
# installer's udebs), deb_dir (regular packages: stand-ins for udebs the mirror does not serve,
# and for Debian 13 the kernel whose md modules the installer's module udeb would carry),
# netboot_dir, di_abi (the netboot kernel's ABI).
# The mirror is the one this machine's apt uses (/etc/apt/sources.list*, deb.debian.org if none).

# Debian 12: the installer's udebs through a private apt directory (`bookworm
# main/debian-installer`), kernel ABI of the netboot image 6.1.0-50.
DI12_UDEBS="partman-base partman-md partman-crypto partman-auto partman-auto-crypto di-utils
md-modules-6.1.0-50-amd64-di crypto-dm-modules-6.1.0-50-amd64-di scsi-modules-6.1.0-50-amd64-di"
# Missing as udebs on the mirror (404): mdadm-udeb, parted-udeb/libparted2-udeb (parted_server's
# library), cryptsetup-udeb. Their regular packages' files go into the second initrd.
# di-utils-mapdevfs (404 too) is stood in for by guest/standins/mapdevfs.
DI12_DEBS="mdadm libparted2 libparted-fs-resize0 libdevmapper1.02.1 parted"

# Debian 13: every udeb the scenario runs is served (parted's, partman-utils, mapdevfs, mdadm's
# and the RAID ones too); trixie's main/debian-installer index fails apt's size check here, so
# each udeb comes from the pool by the index's Filename:, verified by its SHA256:.
DI13_UDEBS="partman-base partman-utils partman-md partman-crypto partman-auto partman-auto-crypto
partman-auto-raid di-utils di-utils-mapdevfs mdcfg mdcfg-utils mdadm-udeb finish-install
parted-udeb libparted2-udeb libparted-fs-resize0-udeb libdevmapper1.02.1-udeb"
# md-modules-ABI-di answers 404: the md modules come from linux-image-ABI (the same build).

apt_q() { apt-get -q -o APT::Sandbox::User=root "$@"; }

# mirror: the Debian mirror of this machine's apt sources.
mirror() {
    local uri
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ { u = $2 } /^Suites:/ && / (bookworm|trixie)( |$)/ && u !~ /security/ { print u; exit }')
    [ -n "$uri" ] || uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" && $0 !~ /security/ && / (bookworm|trixie) / { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')
    echo "${uri:-http://deb.debian.org/debian}"
}

# private_apt DIR LINE: apt options (array apt_o) for a private sources list holding LINE.
private_apt() {
    local a=$1
    mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/etc"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s\n' "$2" >"$a/etc/sources.list"
    apt_o=(-o "Dir::Etc::sourcelist=$a/etc/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$a/lists"
        -o "Dir::Cache=$a/cache" -o Dir::State::status=/dev/null)
    ls "$a/lists/"*_Packages* >/dev/null 2>&1 || apt_q "${apt_o[@]}" update >&2
}

candidate() { apt-cache "$@" | sed -n 's/^ *Candidate: //p'; }

# download_debs DIR_PREFIX PKG...: regular packages at their candidate versions (apt_o set).
download_debs() {
    local prefix=$1 key="" p v
    shift
    for p in "$@"; do
        v=$(candidate "${apt_o[@]}" policy "$p")
        [ -n "$v" ] && [ "$v" != "(none)" ] || die "$p is not on the mirror"
        key="$key $p=$v"
    done
    deb_dir=$prefix-$(echo "$key" | md5sum | cut -c1-12)
    if [ ! -f "$deb_dir/ready" ]; then
        log "downloading regular packages:$key"
        rm -rf "$deb_dir"
        mkdir -p "$deb_dir"
        # shellcheck disable=SC2086
        (cd "$deb_dir" && apt_q "${apt_o[@]}" download $key >&2)
        echo "$key" >"$deb_dir/versions"
        touch "$deb_dir/ready"
    fi
}

# netboot RELEASE: the netboot deb through apt (apt_o set), unpacked; sets netboot_dir kernel initrd.
netboot() {
    local r=$1 ver nb
    ver=$(candidate "${apt_o[@]}" policy "debian-installer-$r-netboot-amd64")
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "debian-installer-$r-netboot-amd64 not on the mirror"
    netboot_dir=$cache/netboot-$r-$ver
    if [ ! -f "$netboot_dir/ready" ]; then
        log "downloading debian-installer-$r-netboot-amd64 $ver"
        rm -rf "$netboot_dir"
        mkdir -p "$netboot_dir"
        (cd "$netboot_dir" && apt_q "${apt_o[@]}" download "debian-installer-$r-netboot-amd64=$ver" >&2)
        dpkg-deb -x "$netboot_dir"/*.deb "$netboot_dir/x"
        rm -f "$netboot_dir"/*.deb
        # The kernel ABI, from the initrd's own modules.
        zcat "$netboot_dir/x/usr/lib/debian-installer/images/$r/amd64/text/debian-installer/amd64/initrd.gz" |
            cpio -t --quiet 2>/dev/null | sed -n "s|^\(usr/\)\{0,1\}lib/modules/\([^/]*\)/.*|\2|p" | sort -u >"$netboot_dir/abi" || :
        touch "$netboot_dir/ready"
    fi
    nb=$netboot_dir/x/usr/lib/debian-installer/images/$r/amd64/text/debian-installer/amd64
    kernel=$nb/linux
    initrd=$nb/initrd.gz
    di_abi=$(cat "$netboot_dir/abi")
    [ -f "$kernel" ] && [ -f "$initrd" ] && [ -n "$di_abi" ] || die "no kernel/initrd/ABI in $netboot_dir"
}

fetch_12() {
    local uri p v key=""
    uri=$(mirror)
    # The netboot image and the stand-ins through the host's own sources (bookworm-updates too).
    apt_o=()
    [ -n "$(candidate policy debian-installer-12-netboot-amd64)" ] || apt_q update >&2
    netboot 12
    private_apt "$cache/apt" "$uri bookworm main/debian-installer"
    for p in $DI12_UDEBS; do
        v=$(candidate "${apt_o[@]}" policy "$p")
        [ -n "$v" ] && [ "$v" != "(none)" ] || die "udeb $p not in the installer's index"
        key="$key $p=$v"
    done
    udeb_dir=$cache/udebs-$(echo "$key" | md5sum | cut -c1-12)
    if [ ! -f "$udeb_dir/ready" ]; then
        log "downloading udebs:$key"
        rm -rf "$udeb_dir"
        mkdir -p "$udeb_dir"
        # shellcheck disable=SC2086
        (cd "$udeb_dir" && apt_q "${apt_o[@]}" download $key >&2)
        echo "$key" >"$udeb_dir/versions"
        touch "$udeb_dir/ready"
    fi
    apt_o=()
    # shellcheck disable=SC2086
    download_debs "$cache/debs" $DI12_DEBS
}

# pool_udebs URI INDEX PKG...: each udeb from the pool by INDEX's Filename:, checked against its
# SHA256:, into $udeb_dir (keyed by the packages' versions).
pool_udebs() {
    local uri=$1 index=$2 p f s key=""
    shift 2
    for p in "$@"; do
        read -r f s <<<"$(awk -v p="$p" '/^Package: / { x = ($2 == p) } x && /^Filename: / { f = $2 }
            x && /^SHA256: / { s = $2 } /^$/ && x && f != "" { print f, s; exit } END { if (x && f != "") print f, s }' "$index" | head -1)"
        [ -n "$f" ] && [ -n "$s" ] || die "udeb $p not in trixie's main/debian-installer index"
        key="$key $f"
    done
    udeb_dir=$cache/udebs13-$(echo "$key" | md5sum | cut -c1-12)
    [ -f "$udeb_dir/ready" ] && return 0
    log "downloading udebs from the pool:$key"
    rm -rf "$udeb_dir"
    mkdir -p "$udeb_dir"
    for p in "$@"; do
        read -r f s <<<"$(awk -v p="$p" '/^Package: / { x = ($2 == p) } x && /^Filename: / { f = $2 }
            x && /^SHA256: / { s = $2 } /^$/ && x && f != "" { print f, s; exit } END { if (x && f != "") print f, s }' "$index" | head -1)"
        curl -fsS --retry 3 -o "$udeb_dir/${f##*/}" "$uri/$f" || die "cannot download $uri/$f"
        echo "$s  $udeb_dir/${f##*/}" | sha256sum -c --quiet - >&2 || die "${f##*/}: SHA256 differs from the index"
    done
    echo "$key" >"$udeb_dir/versions"
    touch "$udeb_dir/ready"
}

fetch_13() {
    local uri index
    uri=$(mirror)
    command -v curl >/dev/null && command -v xz >/dev/null || die "curl and xz are needed: apt-get install curl xz-utils"
    private_apt "$cache/apt13" "$uri trixie main"
    netboot 13
    # The index of the day (its udebs' versions key the cache).
    index=$cache/trixie-di-Packages
    if [ ! -s "$index" ] || [ -n "$(find "$index" -mmin +720)" ]; then
        curl -fsS --retry 3 "$uri/dists/trixie/main/debian-installer/binary-amd64/Packages.xz" |
            xz -dc >"$index.tmp" && mv "$index.tmp" "$index" ||
            { [ -s "$index" ] || die "cannot read trixie's main/debian-installer index"; }
    fi
    # shellcheck disable=SC2086
    pool_udebs "$uri" "$index" $DI13_UDEBS
    download_debs "$cache/debs13" "linux-image-$di_abi"
}

fetch_all() {
    mkdir -p "$cache"
    case $1 in
        12) fetch_12 ;;
        13) fetch_13 ;;
        *) die "unknown release $1 (12 or 13)" ;;
    esac
}

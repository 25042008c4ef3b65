//! Pure: an md array's creation time from a member's superblock, which the kernel does not
//! show in sysfs (`mdadm --examine` prints it as "Creation Time"). Used by the check schedule
//! to skip young arrays, as Debian's checkarray does.
//!
//! Layouts (the kernel's `include/uapi/linux/raid/md_p.h`, `drivers/md/md.c`):
//! - v1.x (`mdp_superblock_1`, little-endian): `magic` (u32, `0xa92b4efc`) at 0, `ctime` (u64) at
//!   64, whose low 40 bits are seconds since the epoch (the high 24 bits microseconds). It sits at
//!   4 KiB from the member's start (1.2), at 0 (1.1), or for 1.0 at
//!   `(sectors - 16) & !7` sectors (`super_1_load`: 8 KiB from the end, 4 KiB aligned).
//! - v0.90 (`mdp_super_t`, host-endian): `md_magic` (u32) at 0, `ctime` (u32 seconds) at 24,
//!   at `(bytes & !(64 KiB - 1)) - 64 KiB` (`MD_NEW_SIZE_SECTORS`).
//!
//! External metadata (`external:imsm`, ...) and `none` have no md superblock: no time.

/// Bytes to read at [`offset_bytes`]: enough for the `ctime` of either layout.
pub const READ_BYTES: usize = 4096;

/// The superblock magic of both layouts.
pub const MD_SB_MAGIC: u32 = 0xa92b_4efc;

/// Byte offset of the superblock on a member of `member_bytes` bytes, for the array's
/// `md/metadata_version` text (`1.2`, `1.1`, `1.0`, `0.90`); `None` for external metadata,
/// `none`, unknown versions and members too small to hold one.
pub fn offset_bytes(metadata_version: &str, member_bytes: u64) -> Option<u64> {
    match metadata_version.trim() {
        "1.2" => Some(4096),
        "1.1" => Some(0),
        "1.0" => {
            let sectors = member_bytes / 512;
            sectors.checked_sub(16).map(|s| (s & !7) * 512)
        }
        "0.90" | "0.90.0" | "0.9" => {
            const RESERVED: u64 = 64 * 1024;
            (member_bytes & !(RESERVED - 1)).checked_sub(RESERVED)
        }
        _ => None,
    }
}

/// The creation time (Unix seconds) in `block`, the bytes read at [`offset_bytes`] for
/// `metadata_version`; `None` when the magic does not match, the block is short, the version
/// has no superblock, or the time is 0.
pub fn ctime(metadata_version: &str, block: &[u8]) -> Option<i64> {
    let u32_at = |off: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            block.get(off..off + 4)?.try_into().ok()?,
        ))
    };
    let v = metadata_version.trim();
    if u32_at(0)? != MD_SB_MAGIC {
        return None;
    }
    let secs = if v.starts_with("1.") {
        let raw = u64::from_le_bytes(block.get(64..72)?.try_into().ok()?);
        raw & 0xff_ffff_ffff
    } else if v.starts_with("0.9") {
        u64::from(u32_at(24)?)
    } else {
        return None;
    };
    i64::try_from(secs).ok().filter(|s| *s > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(ctime_s: u64, usec: u64) -> Vec<u8> {
        let mut b = vec![0u8; READ_BYTES];
        b[0..4].copy_from_slice(&MD_SB_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[64..72].copy_from_slice(&(ctime_s | (usec << 40)).to_le_bytes());
        b
    }

    #[test]
    fn v1_ctime_is_the_low_40_bits() {
        assert_eq!(
            ctime("1.2", &v1(1_764_547_200, 123_456)),
            Some(1_764_547_200)
        );
        assert_eq!(ctime("1.0\n", &v1(1_000, 0)), Some(1_000));
        assert_eq!(ctime("1.2", &v1(0, 5)), None, "no time recorded");
    }

    #[test]
    fn v090_ctime_is_a_u32_at_24() {
        let mut b = vec![0u8; READ_BYTES];
        b[0..4].copy_from_slice(&MD_SB_MAGIC.to_le_bytes());
        b[24..28].copy_from_slice(&1_600_000_000u32.to_le_bytes());
        assert_eq!(ctime("0.90", &b), Some(1_600_000_000));
    }

    #[test]
    fn wrong_magic_short_block_or_external_is_none() {
        let mut b = v1(1_000, 0);
        b[0] ^= 1;
        assert_eq!(ctime("1.2", &b), None);
        assert_eq!(ctime("1.2", &v1(1_000, 0)[..40]), None);
        assert_eq!(ctime("external:imsm", &v1(1_000, 0)), None);
    }

    #[test]
    fn offsets_follow_the_kernel() {
        assert_eq!(offset_bytes("1.2", 1 << 30), Some(4096));
        assert_eq!(offset_bytes("1.1", 1 << 30), Some(0));
        // 1 GiB = 2097152 sectors: (2097152 - 16) & !7 = 2097136 sectors.
        assert_eq!(offset_bytes("1.0", 1 << 30), Some(2_097_136 * 512));
        // 1 GiB + 1000 bytes: rounded down to 64 KiB, minus 64 KiB.
        assert_eq!(
            offset_bytes("0.90", (1 << 30) + 1000),
            Some((1 << 30) - 65536)
        );
        assert_eq!(offset_bytes("1.0", 4096), None);
        assert_eq!(offset_bytes("external:/md127/0", 1 << 30), None);
        assert_eq!(offset_bytes("none", 1 << 30), None);
    }
}

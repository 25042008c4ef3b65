//! Array health as `mdadm --detail --test` reports it in its exit status: pure, no I/O.
//!
//! man mdadm, `--test`: 0 the array works normally, 1 it has at least one failed (missing)
//! device, 2 it has so many failed devices that it is unusable, 4 its information could not be
//! read. `mdpilot status --test` gives the worst over the arrays shown.
//!
//! "Unusable": an inactive or broken array (it serves no data), or more members missing than the
//! level survives: raid1 with no member in sync, raid4/5 two missing, raid6 three, raid0/linear
//! one, raid10 both halves of a mirror pair (assumed the default `near=2` layout: slots 2i and
//! 2i+1 for an even count, neighbouring slots otherwise; read from the `[UU_U]` pattern).

use crate::model::{Array, MdStat};

/// The `--test` verdict for one array or a set, worst last (so `max` combines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Every member present.
    Ok,
    /// At least one member missing, data still served.
    Degraded,
    /// Not serving data: inactive, broken, or too few members for its level.
    Unusable,
}

impl Health {
    /// The exit status of `mdadm --detail --test`: 0, 1, 2.
    pub fn exit_code(self) -> u8 {
        match self {
            Health::Ok => 0,
            Health::Degraded => 1,
            Health::Unusable => 2,
        }
    }
}

/// Exit status for "could not read the arrays" (`/proc/mdstat` missing, unreadable, or parts
/// of it not parseable).
pub const EXIT_READ_ERROR: u8 = 4;

/// The verdict for one array from the model's facts ([`Array::is_serving`],
/// [`Array::raid_disks`], [`Array::degraded`], [`Array::level`]: sysfs where read, else mdstat).
pub fn array_health(a: &Array) -> Health {
    if !a.is_serving() {
        return Health::Unusable;
    }
    let missing = a.degraded().unwrap_or(0);
    if missing == 0 {
        // raid0, linear, containers print no counts: running means whole.
        return Health::Ok;
    }
    let Some(total) = a.raid_disks() else {
        // Members missing from an array of unknown size: it still serves data.
        return Health::Degraded;
    };
    let survives = match a.level().unwrap_or("") {
        "raid1" => missing < total,
        "raid4" | "raid5" => missing < 2,
        "raid6" => missing < 3,
        "raid10" => !raid10_pair_lost(a.member_status.as_deref().unwrap_or(""), total),
        "raid0" | "linear" => false,
        // multipath, faulty, unknown personalities: any loss may be the end.
        _ => missing < total,
    };
    if survives {
        Health::Degraded
    } else {
        Health::Unusable
    }
}

/// Both copies of some block gone, assuming `near=2`: `pattern` is mdstat's `UU_U` by slot.
fn raid10_pair_lost(pattern: &str, total: u32) -> bool {
    let down: Vec<bool> = pattern.chars().map(|c| c != 'U').collect();
    if down.len() != total as usize || down.is_empty() {
        // Pattern not printed or inconsistent: judge by count (half gone loses data for sure).
        return down.iter().filter(|d| **d).count() * 2 > down.len().max(1);
    }
    let n = down.len();
    if n % 2 == 0 {
        (0..n / 2).any(|i| down[2 * i] && down[2 * i + 1])
    } else {
        (0..n).any(|i| down[i] && down[(i + 1) % n])
    }
}

/// The worst verdict over every array of `stat` ([`Health::Ok`] when there are none).
pub fn health(stat: &MdStat) -> Health {
    stat.arrays
        .iter()
        .map(array_health)
        .max()
        .unwrap_or(Health::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(text: &str) -> Health {
        health(&crate::mdstat::parse(text))
    }

    fn stanza(level: &str, counts: &str, pattern: &str) -> String {
        format!(
            "Personalities : [{level}]\nmd0 : active {level} sdb[1] sda[0]\n      1046528 blocks super 1.2 {counts} [{pattern}]\n\nunused devices: <none>\n"
        )
    }

    #[test]
    fn levels_survive_as_their_redundancy_allows() {
        assert_eq!(verdict(&stanza("raid1", "[2/2]", "UU")), Health::Ok);
        assert_eq!(verdict(&stanza("raid1", "[2/1]", "U_")), Health::Degraded);
        assert_eq!(verdict(&stanza("raid5", "[3/2]", "UU_")), Health::Degraded);
        assert_eq!(verdict(&stanza("raid5", "[3/1]", "U__")), Health::Unusable);
        assert_eq!(verdict(&stanza("raid6", "[4/2]", "U__U")), Health::Degraded);
        assert_eq!(
            verdict(&stanza("raid6", "[5/2]", "U___U")),
            Health::Unusable
        );
        assert_eq!(
            verdict(&stanza("raid10", "[4/2]", "U_U_")),
            Health::Degraded
        );
        assert_eq!(
            verdict(&stanza("raid10", "[4/2]", "__UU")),
            Health::Unusable
        );
        assert_eq!(Health::Unusable.exit_code(), 2);
        assert_eq!(
            verdict("Personalities : \nunused devices: <none>\n"),
            Health::Ok
        );
    }

    #[test]
    fn inactive_is_unusable_and_the_worst_array_wins() {
        let text = "Personalities : [raid1]\nmd0 : active raid1 sdb[1] sda[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n\nmd1 : inactive sdc[0](S)\n      1046528 blocks super 1.2\n\nunused devices: <none>\n";
        let stat = crate::mdstat::parse(text);
        assert_eq!(array_health(&stat.arrays[0]), Health::Degraded);
        assert_eq!(array_health(&stat.arrays[1]), Health::Unusable);
        assert_eq!(health(&stat), Health::Unusable);
    }
}

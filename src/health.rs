//! Array health as `mdadm --detail --test` reports it in its exit status: pure, no I/O.
//!
//! man mdadm, `--test`: 0 the array works normally, 1 it has at least one failed (missing)
//! device, 2 it has so many failed devices that it is unusable, 4 its information could not be
//! read. `mdpilot status --test` gives the worst over the arrays shown.
//!
//! "Unusable" (exit 2): a broken array, or more members missing than the level survives
//! ([`crate::model::Level::survives`]: raid1 with no member in sync, raid4/5 two missing, raid6
//! three, raid0/linear one, raid10 both halves of a mirror pair, assuming `near=2`). An inactive
//! array serves no data either: exit 2 too, but its own word, `inactive`, on D-Bus. The rule
//! is the model's ([`Array::health`]); this module gives the exit codes and the worst of a set.

use crate::model::{Array, MdStat};
pub use crate::vocab::Health;

/// Exit status for "could not read the arrays" (`/proc/mdstat` missing, unreadable, or parts
/// of it not parseable).
pub const EXIT_READ_ERROR: u8 = 4;

/// The verdict for one array: the model's ([`Array::health`]), the one verdict `status
/// --test`, the D-Bus `Health` and the Cockpit page show.
pub fn array_health(a: &Array) -> Health {
    a.health()
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
        assert_eq!(array_health(&stat.arrays[1]), Health::Inactive);
        assert_eq!(health(&stat), Health::Inactive);
        assert_eq!(health(&stat).exit_code(), 2);
    }
}

//! The last hour of each array's sync, kept by the service in memory: one sample per
//! [`INTERVAL_S`] of (time, `md/sync_speed`, `md/sync_speed_max`, io pressure `full avg10`),
//! at most [`CAPACITY`] per array, so a client (the Cockpit page's chart) shows the last hour
//! of a check or resync even when it connected a minute ago. Pure: the service loop hands in
//! its model and the pressure it read ([`SyncHistory::observe`]); `Array.GetSyncHistory`
//! reads it ([`SyncHistory::samples`]).
//!
//! Memory bound: a sample is 40 bytes, a ring is allocated once for [`CAPACITY`] of them
//! (14 KiB, never grown: the oldest goes before a new one comes) plus the array's name; only
//! arrays that synced within the window ([`CAPACITY`] × [`INTERVAL_S`]) have a ring, and a
//! ring goes with its array. 64 arrays all syncing within the hour: about 900 KiB. Nothing is
//! written to disk: a restart of the service starts afresh (the history is for looking at,
//! not a record).

use crate::model::{Array, MdStat};
use std::collections::{BTreeMap, VecDeque};

/// Seconds between two samples of the service (one sample per slot of this length: later
/// observations in the same slot replace its sample).
pub const INTERVAL_S: u64 = 10;
/// Samples kept per array: 360 × 10 s = one hour.
pub const CAPACITY: usize = 360;

/// One sample of an array's sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When, Unix seconds.
    pub time_s: u64,
    /// [`Array::sync_speed_kib_s`] (md's `sync_speed`, KiB/s); 0 when no sync runs (the
    /// sample that closes a sync) or md does not say.
    pub speed_kib_s: u64,
    /// The limit in force, KiB/s: `md/sync_speed_max` (the array's own value, else the
    /// system's `speed_limit_max`: what the check throttle's lease writes); 0 where unknown.
    pub limit_kib_s: u64,
    /// `/proc/pressure/io` `full avg10`, percent (0–100); `None` without PSI.
    pub full_avg10_pct: Option<f64>,
}

impl Sample {
    /// The D-Bus form `(tttd)`: time (Unix s), speed (KiB/s), limit (KiB/s), pressure
    /// (percent, -1 where unknown: JSON, Cockpit's transport, has no NaN).
    pub fn wire(&self) -> (u64, u64, u64, f64) {
        (
            self.time_s,
            self.speed_kib_s,
            self.limit_kib_s,
            self.full_avg10_pct.unwrap_or(-1.0),
        )
    }
}

/// The samples of one array, oldest first, times strictly increasing, at most `capacity`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ring {
    interval_s: u64,
    capacity: usize,
    samples: VecDeque<Sample>,
}

impl Ring {
    /// An empty ring of slots of `interval_s` seconds (at least 1) holding at most `capacity`
    /// samples (at least 1), allocated at once.
    pub fn new(interval_s: u64, capacity: usize) -> Ring {
        let capacity = capacity.max(1);
        Ring {
            interval_s: interval_s.max(1),
            capacity,
            samples: VecDeque::with_capacity(capacity),
        }
    }

    /// Adds `s`: a sample in the slot of the last one replaces it (the latest reading of the
    /// slot wins); a sample older than the last (the clock was set back) first drops the
    /// samples at or after its time, so times stay increasing; the oldest goes beyond the
    /// capacity. A pressure that is not a finite percent (0–100) is kept as unknown.
    pub fn record(&mut self, mut s: Sample) {
        s.full_avg10_pct = s
            .full_avg10_pct
            .filter(|p| p.is_finite() && (0.0..=100.0).contains(p));
        let slot = self.slot(s.time_s);
        while self
            .samples
            .back()
            .is_some_and(|l| self.slot(l.time_s) > slot)
        {
            self.samples.pop_back();
        }
        match self.samples.back_mut() {
            Some(l) if l.time_s / self.interval_s == slot => *l = s,
            _ => {
                // The oldest goes first, so the deque never grows past its allocation.
                while self.samples.len() >= self.capacity {
                    self.samples.pop_front();
                }
                self.samples.push_back(s);
            }
        }
    }

    fn slot(&self, time_s: u64) -> u64 {
        time_s / self.interval_s
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter()
    }

    /// The newest sample.
    pub fn last(&self) -> Option<&Sample> {
        self.samples.back()
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// No sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// The rings of every array that synced within the window, by kernel name.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncHistory {
    interval_s: u64,
    capacity: usize,
    arrays: BTreeMap<String, Ring>,
}

impl Default for SyncHistory {
    /// [`INTERVAL_S`], [`CAPACITY`]: one hour.
    fn default() -> SyncHistory {
        SyncHistory::new(INTERVAL_S, CAPACITY)
    }
}

impl SyncHistory {
    /// No history yet; rings of `interval_s` slots (at least 1) and `capacity` samples (at
    /// least 1). The service uses [`SyncHistory::default`]; the simulator shorter slots.
    pub fn new(interval_s: u64, capacity: usize) -> SyncHistory {
        SyncHistory {
            interval_s: interval_s.max(1),
            capacity: capacity.max(1),
            arrays: BTreeMap::new(),
        }
    }

    /// How far back a ring reaches, seconds: `interval_s × capacity`.
    pub fn window_s(&self) -> u64 {
        self.interval_s.saturating_mul(self.capacity as u64)
    }

    /// One look of the service at `model` at `now_s`: a sample for each array running a sync
    /// ([`Array::running_sync`]), and a closing sample (speed 0) for one whose sync stopped
    /// since the last look; `pressure` (the `full avg10` percent, `None` without PSI) is
    /// called at most once, only when there is a sample to take. Rings of arrays no longer in
    /// the model, and rings whose newest sample is older than the window, are dropped.
    pub fn observe(&mut self, model: &MdStat, now_s: u64, pressure: impl FnOnce() -> Option<f64>) {
        let window = self.window_s();
        self.arrays.retain(|name, ring| {
            model.arrays.iter().any(|a| &a.name == name)
                && ring
                    .last()
                    .is_some_and(|l| l.time_s.saturating_add(window) >= now_s)
        });
        let due: Vec<&Array> = model
            .arrays
            .iter()
            .filter(|a| {
                a.running_sync().is_some()
                    || self
                        .arrays
                        .get(&a.name)
                        .and_then(Ring::last)
                        .is_some_and(|l| l.speed_kib_s != 0)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let full_avg10_pct = pressure();
        for a in due {
            let speed = a.running_sync().and(a.sync_speed_kib_s()).unwrap_or(0);
            let limit = a
                .sysfs
                .as_ref()
                .and_then(|s| s.sync_speed_max)
                .map_or(0, |l| l.kib_s);
            let (interval, capacity) = (self.interval_s, self.capacity);
            self.arrays
                .entry(a.name.clone())
                .or_insert_with(|| Ring::new(interval, capacity))
                .record(Sample {
                    time_s: now_s,
                    speed_kib_s: speed,
                    limit_kib_s: limit,
                    full_avg10_pct,
                });
        }
    }

    /// The samples of `array` (kernel name), oldest first, in the D-Bus form
    /// ([`Sample::wire`]); empty when it did not sync within the window.
    pub fn samples(&self, array: &str) -> Vec<(u64, u64, u64, f64)> {
        self.arrays
            .get(array)
            .map(|r| r.samples().map(Sample::wire).collect())
            .unwrap_or_default()
    }

    /// The ring of `array`, if it has one.
    pub fn ring(&self, array: &str) -> Option<&Ring> {
        self.arrays.get(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: u64, speed: u64) -> Sample {
        Sample {
            time_s: t,
            speed_kib_s: speed,
            limit_kib_s: 200_000,
            full_avg10_pct: Some(1.0),
        }
    }

    fn times(r: &Ring) -> Vec<u64> {
        r.samples().map(|x| x.time_s).collect()
    }

    #[test]
    fn the_ring_is_bounded_and_drops_the_oldest() {
        let mut r = Ring::new(10, 360);
        for i in 0..1000 {
            r.record(s(1_000_000 + i * 10, i));
        }
        assert_eq!(r.len(), 360);
        assert_eq!(r.samples.capacity(), 360, "allocated once, never grown");
        assert_eq!(
            std::mem::size_of::<Sample>(),
            40,
            "the documented memory bound"
        );
        assert_eq!(r.samples().next().unwrap().speed_kib_s, 640);
        assert_eq!(r.last().unwrap().speed_kib_s, 999);
        let t = times(&r);
        assert!(t.windows(2).all(|w| w[0] < w[1]), "increasing");
    }

    #[test]
    fn one_sample_per_slot_the_latest_wins() {
        let mut r = Ring::new(10, 360);
        r.record(s(100, 1));
        r.record(s(104, 2));
        r.record(s(109, 3));
        assert_eq!((r.len(), r.last().unwrap().speed_kib_s), (1, 3));
        assert_eq!(r.last().unwrap().time_s, 109);
        r.record(s(110, 4));
        assert_eq!(times(&r), vec![109, 110]);
    }

    #[test]
    fn a_clock_set_back_keeps_times_increasing() {
        let mut r = Ring::new(10, 360);
        for t in [100, 110, 120, 130] {
            r.record(s(t, t));
        }
        r.record(s(112, 7));
        assert_eq!(times(&r), vec![100, 112]);
        assert_eq!(r.last().unwrap().speed_kib_s, 7);
        r.record(s(0, 8));
        assert_eq!(times(&r), vec![0]);
    }

    #[test]
    fn extreme_values_are_kept_and_pressure_that_is_no_percent_is_unknown() {
        let mut r = Ring::new(0, 0);
        let max = u64::MAX;
        r.record(Sample {
            time_s: max,
            speed_kib_s: max,
            limit_kib_s: max,
            full_avg10_pct: Some(f64::NAN),
        });
        assert_eq!(r.last().unwrap().wire(), (max, max, max, -1.0));
        for bad in [f64::INFINITY, -0.5, 100.5, f64::NEG_INFINITY] {
            r.record(Sample {
                full_avg10_pct: Some(bad),
                ..s(max, 1)
            });
            assert_eq!(r.last().unwrap().full_avg10_pct, None, "{bad}");
        }
        r.record(s(max, 2));
        assert_eq!((r.len(), r.last().unwrap().wire().3), (1, 1.0));
    }

    proptest::proptest! {
        /// Whatever the clock does: at most `capacity` samples, times strictly increasing,
        /// one per slot, and the last one recorded is the newest.
        #[test]
        fn any_sequence_stays_bounded_ordered_and_ends_with_the_last(
            interval in 0u64..30,
            capacity in 0usize..50,
            steps in proptest::collection::vec((0u64..2_000, proptest::num::f64::ANY), 1..300),
        ) {
            let mut r = Ring::new(interval, capacity);
            for (i, (t, p)) in steps.iter().enumerate() {
                r.record(Sample { full_avg10_pct: Some(*p), ..s(*t, i as u64) });
                let last = r.last().unwrap();
                proptest::prop_assert_eq!((last.time_s, last.speed_kib_s), (*t, i as u64));
                proptest::prop_assert!(last.full_avg10_pct.map_or(true, |p| (0.0..=100.0).contains(&p)));
            }
            proptest::prop_assert!(r.len() <= capacity.max(1));
            let slots: Vec<u64> = r.samples().map(|x| x.time_s / interval.max(1)).collect();
            proptest::prop_assert!(slots.windows(2).all(|w| w[0] < w[1]), "{:?}", slots);
        }
    }

    fn model(text: &str) -> MdStat {
        crate::mdstat::parse(text)
    }

    const CHECKING: &str = "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n      [==>..................]  check = 12.5% (131072/1048576) finish=1.0min speed=120000K/sec\n\nunused devices: <none>\n";
    const IDLE: &str = "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

    #[test]
    fn observe_samples_syncs_closes_them_and_forgets_old_and_gone_arrays() {
        let mut h = SyncHistory::new(10, 6);
        let mut reads = 0;
        h.observe(&model(IDLE), 1000, || {
            reads += 1;
            None
        });
        assert_eq!(
            (h.samples("md0").len(), reads),
            (0, 0),
            "idle: nothing read"
        );
        for t in [1010, 1020, 1030] {
            h.observe(&model(CHECKING), t, || Some(12.0));
        }
        assert_eq!(
            h.samples("md0"),
            vec![
                (1010, 120_000, 0, 12.0),
                (1020, 120_000, 0, 12.0),
                (1030, 120_000, 0, 12.0)
            ]
        );
        // The check ends: one closing sample at speed 0, then nothing more.
        h.observe(&model(IDLE), 1040, || None);
        h.observe(&model(IDLE), 1050, || panic!("nothing to sample"));
        assert_eq!(h.samples("md0").last(), Some(&(1040, 0, 0, -1.0)));
        assert_eq!(h.samples("md0").len(), 4);
        // Beyond the window (6 × 10 s) the ring goes.
        h.observe(&model(IDLE), 1040 + 61, || None);
        assert!(h.ring("md0").is_none());
        // A stopped array's ring goes with it.
        h.observe(&model(CHECKING), 2000, || None);
        h.observe(
            &model("Personalities : \nunused devices: <none>\n"),
            2001,
            || None,
        );
        assert!(h.ring("md0").is_none());
    }
}

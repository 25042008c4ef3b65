//! A wipe's progress for people and programs: the terminal bar of `mdpilot wipe` ([`Bar`], its
//! fields [`BarFields`]) and the `progress` event of `--progress json` ([`progress_event`]).
//!
//! The bar shows durable bytes only (the engine counts a block once its request completed) and
//! no made-up numbers: no rate or ETA before the first durable bytes, no ETA where the engine
//! knows none ([`crate::wipe::Progress::eta_s`]).

use crate::units::{eta, human_rate};
use crate::wipe::{Phase, Progress};
use std::sync::{Arc, Mutex};

/// What the terminal progress bar shows for one progress snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct BarFields {
    /// The phase: `starting`, `wipe`, `flush`, `verify`.
    pub message: &'static str,
    /// Bytes durably written (read back, in `verify`).
    pub position: u64,
    /// `123.4 MiB/s ETA 5s` from the engine's rate; empty until the first bytes are durable
    /// (never a made-up `ETA 0s`), without ETA where it is unknown (`flush`).
    pub tail: String,
}

impl BarFields {
    /// The bar's fields for `pr`; `None` for [`Phase::Done`]: the caller draws the final bar
    /// itself (full on success), so no intermediate `done` frame shows a stale position.
    pub fn of(pr: &Progress) -> Option<BarFields> {
        let (message, position) = match pr.phase {
            Phase::Starting => ("starting", 0),
            Phase::Wipe => ("wipe", pr.done_bytes),
            Phase::Flush => ("flush", pr.done_bytes),
            Phase::Verify => ("verify", pr.verified_bytes),
            Phase::Done => return None,
        };
        let mut tail = String::new();
        if pr.rate_bytes_per_s > 0.0 && (position > 0 || pr.phase == Phase::Flush) {
            tail = human_rate(pr.rate_bytes_per_s);
            if let Some(s) = pr.eta_s() {
                tail.push_str(&format!(" ETA {}", eta(s)));
            }
        }
        Some(BarFields {
            message,
            position,
            tail,
        })
    }
}

/// The phase word and the tail of the bar, read by the template's custom keys.
type Fields = Arc<Mutex<(&'static str, String)>>;

/// The terminal progress bar on stderr: `wipe     [=====>    ] 1.2 GiB/4 GiB 512 MiB/s ETA 6s`.
pub struct Bar {
    bar: indicatif::ProgressBar,
    fields: Fields,
    total: u64,
}

impl Bar {
    /// A bar for a job of `total` bytes.
    pub fn new(total: u64) -> Bar {
        // The bar's text fields live in one shared cell read by the template's custom keys, and
        // the position is set last: every redraw (indicatif draws from each setter) then shows
        // one consistent snapshot, never a new phase with an old position or an old ETA.
        let fields: Fields = Arc::new(Mutex::new(("starting", String::new())));
        let bar = indicatif::ProgressBar::new(total);
        let (f1, f2) = (fields.clone(), fields.clone());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{phase} [{bar:40}] {bytes}/{total_bytes} {tail}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .with_key(
                "phase",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let g = crate::lock::lock(&f1);
                    let _ = write!(w, "{:8}", g.0);
                },
            )
            .with_key(
                "tail",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let g = crate::lock::lock(&f2);
                    let _ = w.write_str(&g.1);
                },
            )
            .progress_chars("=> "),
        );
        Bar { bar, fields, total }
    }

    fn set_fields(&self, message: &'static str, tail: String) {
        *crate::lock::lock(&self.fields) = (message, tail);
    }

    /// Shows `pr` (nothing for [`Phase::Done`]: see [`BarFields::of`]).
    pub fn update(&self, pr: &Progress) {
        if let Some(f) = BarFields::of(pr) {
            self.set_fields(f.message, f.tail);
            self.bar.set_position(f.position);
        }
    }

    /// The final frame: a full `done` bar on success, `stopped` where the job ended otherwise.
    pub fn finish(&self, success: bool) {
        if success {
            self.set_fields("done", String::new());
            self.bar.set_position(self.total);
            self.bar.finish();
        } else {
            self.set_fields("stopped", String::new());
            self.bar.abandon();
        }
    }
}

/// The `progress` event of `--progress json`: the [`Progress`] fields, `event: "progress"` and
/// `eta_s` (seconds, `null` while unknown).
pub fn progress_event(pr: &Progress) -> serde_json::Value {
    let mut v = serde_json::to_value(pr).unwrap_or_default();
    v["event"] = "progress".into();
    v["eta_s"] = pr.eta_s().into();
    v
}

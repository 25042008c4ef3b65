//! The one integration-test binary (`cargo test --test integration`): a module per area, the
//! shared helpers in [`support`]. One link instead of one per file, and one copy of the helpers.
//!
//! Tests that need root (loop devices, mounts, device-mapper, switching to nobody) are named
//! `loop_*` (the module or the function), so the two runs are:
//!
//! - `cargo test --test integration -- --skip loop_`: everything that runs unprivileged;
//! - `cargo test --test integration loop_` (as root): the root tests.
//!
//! With `MDPILOT_REQUIRE_ALL=1` (set by `tests/run` and `.ci/run`), a test that would skip (a tool
//! missing, not root) fails instead; see [`support::skipped`].
//!
//! A new area is a new file `tests/it/<area>.rs` and one `mod <area>;` line below.

#[macro_use]
mod support;

mod bitmap_cli;
mod check_cli;
mod check_yield;
mod dbus_bitmap;
mod dbus_calls;
mod dbus_check;
mod dbus_clients;
mod dbus_files;
mod dbus_jobs;
mod dbus_logind;
mod dbus_policy_cli;
mod dbus_restart;
mod dbus_service;
mod dbus_sync_history;
mod dbus_timed;
mod dbus_trust;
mod fuzz_regressions;
mod health_events_cli;
mod kernel_words;
mod lease_trust;
mod loop_resume;
mod loop_wipe;
mod mdstat_fixtures;
mod mdstat_forms;
mod mdstat_props;
mod metrics_golden;
mod metrics_rules;
mod metrics_serve;
mod policy;
mod policy_crash;
mod policy_d_i;
mod policy_journal;
mod policy_pid_reuse;
mod policy_timed;
mod serve_resume;
mod serve_startup;
mod serve_watchdog;
mod service_trust;
mod skips;
mod state_trust;
mod status_cli;
mod views_agree;
mod wipe_checkpoint;
mod wipe_cli;
mod wipe_engine;
mod wipe_planner;
mod wipe_trust;

//! mdpilot: makes Linux md RAID arrays cooperate with installers and admins.
//!
//! The crate is a pure core (the `/proc/mdstat` parser, the wipe planner, the speed-limit
//! policy state machine) wrapped by thin adapters (sysfs/procfs reader, udev/mdstat watcher,
//! D-Bus objects, CLI). Every path into the kernel goes through [`host::Root`] so tests can
//! hand the code a temporary tree instead of the real `/proc`, `/sys`, `/dev` and `/run`.
//!
//! Map (one concept per file):
//! - [`host`]: the root under which `/proc`, `/sys`, `/dev`, `/run` live.
//! - [`config`]: drop-in TOML configuration.
//! - [`policy`]: resync priority leases on the md speed limits.
//! - [`wipe`]: wipe jobs (probe, planner, engine).
//! - [`events`]: mdadm-style events from successive snapshots; [`health`]: `status --test`
//!   verdicts; [`schedule`]: check windows and selection (all pure).
//! - [`service`]: the D-Bus service; [`cli`]: the front ends (status, policy, wipe, monitor).

pub mod cli;
pub mod config;
pub mod dbus;
pub mod error;
pub mod events;
pub mod health;
pub mod host;
pub mod mdstat;
pub mod model;
pub mod policy;
pub mod schedule;
pub mod service;
pub mod sim;
pub mod sysfs;
pub mod watch;
pub mod wipe;

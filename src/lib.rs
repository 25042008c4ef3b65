//! mdpilot: makes Linux md RAID arrays cooperate with installers and admins.
//!
//! The crate is a pure core (the `/proc/mdstat` parser, the wipe planner, the speed-limit
//! policy state machine) wrapped by thin adapters (sysfs/procfs reader, udev/mdstat watcher,
//! D-Bus objects, CLI). Every path into the kernel goes through [`host::Root`] so tests can
//! hand the code a temporary tree instead of the real `/proc`, `/sys`, `/dev` and `/run`.
//!
//! Map (one concept per file; arrows point down: `cli`, `dbus` and `service` use the core,
//! the core — `mdstat`, `model`, `policy::lease`, `wipe::planner` — imports no I/O):
pub mod alerts; // pure: mdadm-style alerts (Fail, DegradedArray, RebuildNN, CheckFinished...) from snapshots
pub mod array_names; // the names users type for an array (/dev/md/root, md/root, host:root), resolved to the kernel name
pub mod atomic; // the one atomic file replacement (O_EXCL temporary, fsync, rename, directory fsync)
pub mod bitmap; // adding a write-intent bitmap: the plan (pure), the mdadm adapter, the bitmap-wanted list
pub mod check; // resumable checks: the record per array UUID, resume points, results (pure); run: the one executor
pub mod cli; // front ends: status, policy, wipe (+ progress), monitor, blockdev-wipe
pub mod config; // drop-in TOML configuration from /usr/lib, /run and /etc/mdpilot/config.d
#[cfg(feature = "service")]
pub mod dbus; // zbus objects (Manager, Array, Job), option parsing, errors, authorization, client proxies
pub mod error; // the one error-chain printer
pub mod health; // pure: `status --test` verdicts as `mdadm --detail --test`
pub mod host; // `Root`: where /proc, /sys, /dev and /run live (tests pass a temporary tree)
pub mod lock; // the one Mutex lock helper (a poisoned lock is taken as it is)
pub mod mdstat; // pure `/proc/mdstat` parser
pub mod metrics; // mdpilot_* Prometheus families rendered from an owned snapshot (text 0.0.4, OpenMetrics)
pub mod model; // owned domain types (Array, Member, SpeedLimit, SyncAction ...) and their kernel forms
pub mod policy; // resync priority leases on the md speed limits: state machine, durable state, knob writes
pub mod pressure; // pure: the check throttle from the io pressure (a target band, floor, ceiling; AIMD steps)
pub mod resync_throttle; // resync and recovery under the io-pressure controller, where [resync] opts in: the resync-<array> lease
pub mod schedule; // pure: check windows (OnCalendar subset) and which arrays to check now
#[cfg(feature = "service")]
pub mod service; // `mdpilot serve`: the one event loop (check upkeep and schedule as its steps), shutdown, metrics
#[cfg(feature = "service")]
pub mod shared; // the zbus-free state the loop and the D-Bus objects share: model, policy, wipe jobs
#[cfg(feature = "service")]
pub mod sim; // simulated kernel tree for `serve --sim` and tests
pub mod superblock; // pure: an array's creation time from a member's md superblock (v0.90, v1.x)
pub mod sync_history; // pure: the last hour of each array's sync (speed, limit, io pressure), one sample per 10 s
pub mod sysfs; // the one kernel-access layer, reads and writes: /sys/block/*, /proc/mdstat, /proc/sys/dev/raid/*
pub mod throttle_notes; // the throttles' runtime notes files (/run/mdpilot/check-throttle.json, resync-throttle.json)
pub mod units; // human sizes, rates and durations
pub mod vocab; // md's words as types: Level, member states and flags, array states, sync_action, Health, ArrayUuid
#[cfg(feature = "service")]
pub mod watch; // udev, /proc/mdstat and sysfs notifications as owned events
pub mod wipe; // wipe jobs: probe, plan, planner, job, workers, sources, verify, resync
#[cfg(feature = "service")]
pub mod workers; // threads of their own per kind of blocking work (policy, checks, wipe starts, probes)

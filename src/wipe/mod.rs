//! Wipe jobs: probe, planner (pure), engine (issue 5 fills this in).

pub mod cli;

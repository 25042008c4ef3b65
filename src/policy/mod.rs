//! Resync priority policy: leases on md speed limits (issue 3 fills this in).

pub mod cli;

//! The service and the CLI hold up against hostile or failing surroundings: planted symlinks
//! beside files root rewrites, connection floods on the metrics listener, hung hooks, a bus
//! that never answers. Each test runs the real binary against a temporary root or a private
//! bus; nothing touches the host.

#[macro_use]
mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use support::tree::mdstat_root;
use support::{stderr, BIN};

const R1_OK: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

#[test]
fn status_output_does_not_follow_a_symlink_at_the_old_temporary_name() {
    let root = mdstat_root(R1_OK);
    let out_dir = tempfile::tempdir().unwrap();
    let secret = out_dir.path().join("secret");
    std::fs::write(&secret, "root's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let target = out_dir.path().join("mdpilot.prom");
    std::fs::write(&target, "old\n").unwrap();
    // `exec` keeps the shell's pid, so the symlink sits at the name the old code would open.
    let script = format!(
        "ln -s {secret} {dir}/.mdpilot.prom.tmp.$$ && exec {BIN} --root {root} status \
         --format prometheus --output {target}",
        secret = secret.display(),
        dir = out_dir.path().display(),
        root = root.path().display(),
        target = target.display(),
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's secret\n");
    assert_eq!(std::fs::metadata(&secret).unwrap().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("mdpilot_"), "{text}");
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.mode() & 0o777, 0o644);
    // Only the target, the secret and the planted link: no temporary left behind.
    assert_eq!(std::fs::read_dir(out_dir.path()).unwrap().count(), 3);
}

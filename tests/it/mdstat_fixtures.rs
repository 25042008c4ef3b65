//! Every shared /proc/mdstat fixture (tests/fixtures/mdstat/NNN_*.txt, copied from the project's
//! shared fixture set) parsed and compared with `expected/NNN.json`: `personalities` and `arrays`
//! exactly, `errors` by line number (see tests/fixtures/mdstat/README.md).

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mdstat")
}

fn check(file: &str) {
    let text = std::fs::read(dir().join(file)).unwrap();
    let text = String::from_utf8_lossy(&text);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("expected").join(format!("{}.json", &file[..3])))
            .unwrap(),
    )
    .unwrap();
    let got = serde_json::to_value(mdpilot::mdstat::parse(&text)).unwrap();
    assert_eq!(
        got["personalities"], expected["personalities"],
        "{file}: personalities"
    );
    assert_eq!(got["arrays"], expected["arrays"], "{file}: arrays");
    let lines = |v: &Value| -> Vec<u64> {
        v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["line"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        lines(&got),
        lines(&expected),
        "{file}: error lines: {:#?}",
        got["errors"]
    );
}

macro_rules! fixture {
    ($name:ident, $file:literal) => {
        #[test]
        fn $name() {
            check($file);
        }
    };
}

/// The list below must name every fixture file, so a new fixture cannot be skipped silently.
#[test]
fn every_fixture_is_listed() {
    let listed = include_str!("mdstat_fixtures.rs");
    for entry in std::fs::read_dir(dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".txt") {
            assert!(
                listed.contains(&format!("\"{name}\"")),
                "{name} has no test"
            );
        }
    }
}

fixture!(f001_procfs_fixture, "001_procfs_fixture.txt");
fixture!(f003_node_exporter_fixture, "003_node_exporter_fixture.txt");
fixture!(
    f005_node_exporter_mdstat_invalid,
    "005_node_exporter_mdstat_invalid.txt"
);
fixture!(
    f009_procfs_invalid_malformed_component_index,
    "009_procfs_invalid_malformed_component_index.txt"
);
fixture!(
    f011_check_raid_mdstat_failed,
    "011_check_raid_mdstat-failed.txt"
);
fixture!(
    f013_check_raid_mdstat_none,
    "013_check_raid_mdstat-none.txt"
);
fixture!(
    f015_check_raid_mdstat_resync,
    "015_check_raid_mdstat-resync.txt"
);
fixture!(f017_check_raid_pr28_0, "017_check_raid_pr28_0.txt");
fixture!(f019_check_raid_pr28_2, "019_check_raid_pr28_2.txt");
fixture!(f021_check_raid_issue34, "021_check_raid_issue34.txt");
fixture!(
    f023_check_raid_issue43_reshape,
    "023_check_raid_issue43_reshape.txt"
);
fixture!(
    f025_check_raid_issue43_mdstat_rebuilt,
    "025_check_raid_issue43_mdstat-rebuilt.txt"
);
fixture!(f027_check_raid_issue64, "027_check_raid_issue64.txt");
fixture!(f029_check_raid_pr185_0, "029_check_raid_pr185_0.txt");
fixture!(
    f031_check_raid_white_mdstat,
    "031_check_raid_white-mdstat.txt"
);
fixture!(
    f033_telegraf_mdstatsyncstart,
    "033_telegraf_mdStatSyncStart.txt"
);
fixture!(
    f035_telegraf_mdstatfileempty,
    "035_telegraf_mdStatFileEmpty.txt"
);
fixture!(f037_libstorage_ng_parse1, "037_libstorage-ng_parse1.txt");
fixture!(f039_libstorage_ng_parse3, "039_libstorage-ng_parse3.txt");
fixture!(f041_libstorage_ng_parse5, "041_libstorage-ng_parse5.txt");
fixture!(f043_libstorage_ng_parse7, "043_libstorage-ng_parse7.txt");
fixture!(
    f045_libstorage_ng_parse_empty1,
    "045_libstorage-ng_parse_empty1.txt"
);
fixture!(
    f049_libstorage_ng_probe_md_ddf1,
    "049_libstorage-ng_probe_md-ddf1.txt"
);
fixture!(
    f051_libstorage_ng_probe_md1,
    "051_libstorage-ng_probe_md1.txt"
);
fixture!(
    f053_libstorage_ng_probe_md3,
    "053_libstorage-ng_probe_md3.txt"
);
fixture!(f055_pymdstat_mdstat_02, "055_pymdstat_mdstat.02.txt");
fixture!(f057_pymdstat_mdstat_04, "057_pymdstat_mdstat.04.txt");
fixture!(f059_pymdstat_mdstat_06, "059_pymdstat_mdstat.06.txt");
fixture!(f061_pymdstat_mdstat_08, "061_pymdstat_mdstat.08.txt");
fixture!(f063_pymdstat_mdstat_10, "063_pymdstat_mdstat.10.txt");
fixture!(f065_pymdstat_mdstat_12, "065_pymdstat_mdstat.12.txt");
fixture!(f067_pymdstat_mdstat_14, "067_pymdstat_mdstat.14.txt");
fixture!(f069_pymdstat_mdstat_16, "069_pymdstat_mdstat.16.txt");
fixture!(f091_server_state_inactive, "091_server-state_inactive.txt");
fixture!(f093_server_state_raid0, "093_server-state_raid0.txt");
fixture!(
    f095_server_state_raid1w3_2,
    "095_server-state_raid1w3_2.txt"
);
fixture!(
    f097_server_state_raid1w3_faulty_0,
    "097_server-state_raid1w3_faulty_0.txt"
);
fixture!(
    f099_server_state_raid1ws_0,
    "099_server-state_raid1ws_0.txt"
);
fixture!(
    f101_server_state_raid1ws_4,
    "101_server-state_raid1ws_4.txt"
);
fixture!(
    f103_server_state_raid1ws_faulty_3,
    "103_server-state_raid1ws_faulty_3.txt"
);
fixture!(
    f105_server_state_raid1ws_faulty2_0,
    "105_server-state_raid1ws_faulty2_0.txt"
);
fixture!(
    f107_server_state_raid1ws_removed_1,
    "107_server-state_raid1ws_removed_1.txt"
);
fixture!(
    f109_server_state_raid1ws_replace_2,
    "109_server-state_raid1ws_replace_2.txt"
);
fixture!(
    f111_server_state_raid1ws_replace_4,
    "111_server-state_raid1ws_replace_4.txt"
);
fixture!(
    f113_server_state_raid1wsb_faulty_0,
    "113_server-state_raid1wsb_faulty_0.txt"
);
fixture!(
    f115_server_state_raid1wsb_check_0,
    "115_server-state_raid1wsb_check_0.txt"
);
fixture!(
    f117_server_state_raid5wb_0,
    "117_server-state_raid5wb_0.txt"
);
fixture!(
    f119_server_state_raid5wb_2,
    "119_server-state_raid5wb_2.txt"
);
fixture!(
    f121_server_state_raid5ws_0,
    "121_server-state_raid5ws_0.txt"
);
fixture!(
    f123_server_state_raid10ws_0,
    "123_server-state_raid10ws_0.txt"
);
fixture!(
    f125_server_state_raid10ws_4,
    "125_server-state_raid10ws_4.txt"
);
fixture!(
    f127_server_state_raid10ws_faulty2_0,
    "127_server-state_raid10ws_faulty2_0.txt"
);
fixture!(
    f129_insights_core_mdstat_test_2_upstring_mismatch,
    "129_insights-core_MDSTAT_TEST_2_upstring_mismatch.txt"
);
fixture!(
    f131_insights_core_no_md_devices,
    "131_insights-core_NO_MD_DEVICES.txt"
);
fixture!(
    f201_mdpilot_all_members_removed,
    "201_mdpilot_all_members_removed.txt"
);
fixture!(
    f203_mdpilot_all_members_removed_090,
    "203_mdpilot_all_members_removed_090.txt"
);

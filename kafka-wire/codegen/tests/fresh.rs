//! The committed message code is exactly what the generator makes from a copy of Apache Kafka's
//! message specs: the directories named by `KAFKA_MESSAGE_SPECS`, else a fixed path beside the
//! repository (see `codegen/README.md`).

use std::path::PathBuf;

/// The folders of specs: `KAFKA_MESSAGE_SPECS` as a path list (`:`-separated), else the
/// fixed copy beside the repository with its `more-apis/` and `group-coordinator/` folders.
fn specs_dirs() -> Option<Vec<PathBuf>> {
    match std::env::var_os("KAFKA_MESSAGE_SPECS") {
        Some(list) => {
            let dirs: Vec<PathBuf> = std::env::split_paths(&list).collect();
            (!dirs.is_empty() && dirs.iter().all(|d| d.is_dir())).then_some(dirs)
        }
        None => {
            let base = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/kafka-message-specs");
            if !base.is_dir() {
                return None;
            }
            let mut dirs = vec![base.clone()];
            for sub in ["more-apis", "group-coordinator"] {
                if base.join(sub).is_dir() {
                    dirs.push(base.join(sub));
                }
            }
            Some(dirs)
        }
    }
}

#[test]
fn generated_code_is_fresh() {
    let Some(specs) = specs_dirs() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no copy of Apache Kafka's message specs found: set KAFKA_MESSAGE_SPECS to a directory holding them (see kafka-wire/codegen/README.md)"
        );
        eprintln!("notice: no copy of Apache Kafka's message specs found (KAFKA_MESSAGE_SPECS); generated_code_is_fresh skipped");
        return;
    };
    let files = kafka_wire_codegen::generate(&specs).expect("specs generate");
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../src/messages");
    let mut stale = Vec::new();
    for f in &files {
        let committed = std::fs::read_to_string(out.join(&f.name)).unwrap_or_default();
        if committed != f.contents {
            stale.push(f.name.clone());
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&out)
        .expect("messages dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
    expected.sort();
    assert_eq!(on_disk, expected, "unexpected files in src/messages");
    let values = kafka_wire_codegen::generate_values(&specs).expect("specs generate");
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/value_conformance")
            .join(&values.name),
    )
    .unwrap_or_default();
    if committed != values.contents {
        stale.push(format!("tests/value_conformance/{}", values.name));
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}; run: cargo run -p kafka-wire-codegen -- <specs dir>"
    );
}

//! The committed message code is exactly what the generator makes from a copy of Apache Kafka's
//! message specs: the directory named by `KAFKA_MESSAGE_SPECS`, else a fixed path beside the
//! repository (see `codegen/README.md`).

use std::path::PathBuf;

fn specs_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("KAFKA_MESSAGE_SPECS") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kafka-message-specs")
        }
    };
    dir.is_dir().then_some(dir)
}

#[test]
fn generated_code_is_fresh() {
    let Some(specs) = specs_dir() else {
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

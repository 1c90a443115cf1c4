//! `cargo run -p kafka-wire-codegen -- <specs dir>... [--out <output dir>]`: writes the message
//! modules of `kafka-wire` generated from every spec of the given folders (by default into
//! `kafka-wire/src/messages/`), and the type mapping of the value conformance test into
//! `kafka-wire/tests/value_conformance/generated.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut specs = Vec::new();
    let mut out = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--out" {
            out = args.next().map(PathBuf::from);
        } else {
            specs.push(PathBuf::from(a));
        }
    }
    if specs.is_empty() {
        eprintln!("usage: kafka-wire-codegen <specs dir>... [--out <output dir>]");
        return ExitCode::from(2);
    }
    let out =
        out.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../src/messages"));
    let files = match kafka_wire_codegen::generate(&specs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("error: creating {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    for f in &files {
        let path = out.join(&f.name);
        if let Err(e) = std::fs::write(&path, &f.contents) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!("wrote {} files to {}", files.len(), out.display());
    let values = match kafka_wire_codegen::generate_values(&specs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/value_conformance")
        .join(&values.name);
    if let Err(e) = std::fs::write(&path, &values.contents) {
        eprintln!("error: writing {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}

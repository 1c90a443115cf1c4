//! Generates `kafka-wire`'s message code from Apache Kafka's JSON message specs.
//!
//! [`generate`] reads every spec of one or more folders (the JSON dialect with `//` comments:
//! requests, responses and versioned data records such as the records of `__consumer_offsets`,
//! the header specs excepted) and returns the Rust files of `kafka-wire/src/messages/`: one
//! file per message or record plus `mod.rs` with the dispatch enums. The output is deterministic, so a
//! test can regenerate it in memory and compare it with the committed files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

mod emit;
mod model;
mod sample;
mod values;

pub use model::{parse_spec, Spec};

/// Why the specs could not be turned into code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not valid JSON once comments are stripped.
    #[error("parsing {path}: {source}")]
    Json {
        /// The file.
        path: String,
        /// The cause.
        source: serde_json::Error,
    },
    /// A spec uses something this generator does not understand.
    #[error("{0}")]
    Spec(String),
}

/// One generated file: its name inside `src/messages/` and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// File name, such as `fetch_request.rs`.
    pub name: String,
    /// Rust source.
    pub contents: String,
}

/// Removes `//` comments (outside string literals) so the text parses as JSON.
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut escaped = false;
        let bytes = line.as_bytes();
        let mut cut = line.len();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if in_str {
                if escaped {
                    escaped = false;
                } else if c == b'\\' {
                    escaped = true;
                } else if c == b'"' {
                    in_str = false;
                }
            } else if c == b'"' {
                in_str = true;
            } else if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
                cut = i;
                break;
            }
            i += 1;
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// Reads and parses every spec in `specs_dirs` (requests, responses and data records; the
/// header specs excepted), sorted by file name.
pub fn load_specs(specs_dirs: &[PathBuf]) -> Result<Vec<Spec>, GenError> {
    let mut paths = Vec::new();
    for specs_dir in specs_dirs {
        let rd = std::fs::read_dir(specs_dir).map_err(|source| GenError::Io {
            path: specs_dir.display().to_string(),
            source,
        })?;
        for entry in rd {
            let entry = entry.map_err(|source| GenError::Io {
                path: specs_dir.display().to_string(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json")
                && name != "RequestHeader.json"
                && name != "ResponseHeader.json"
            {
                paths.push(entry.path());
            }
        }
    }
    paths.sort_by_key(|p| p.file_name().map(|n| n.to_os_string()));
    let mut specs = Vec::new();
    for p in paths {
        let path = p.display().to_string();
        let text = std::fs::read_to_string(&p).map_err(|source| GenError::Io {
            path: path.clone(),
            source,
        })?;
        let json: Value =
            serde_json::from_str(&strip_comments(&text)).map_err(|source| GenError::Json {
                path: path.clone(),
                source,
            })?;
        specs.push(parse_spec(&json).map_err(|e| GenError::Spec(format!("{path}: {e}")))?);
    }
    Ok(specs)
}

/// Generates the files of `kafka-wire/src/messages/` from the specs in `specs_dirs`.
pub fn generate(specs_dirs: &[PathBuf]) -> Result<Vec<GeneratedFile>, GenError> {
    let specs = load_specs(specs_dirs)?;
    let mut files = Vec::new();
    for spec in &specs {
        files.push(GeneratedFile {
            name: format!("{}.rs", model::snake(&spec.name)),
            contents: emit::message_file(spec).map_err(GenError::Spec)?,
        });
    }
    files.push(GeneratedFile {
        name: "mod.rs".to_string(),
        contents: mod_file(&specs),
    });
    Ok(files)
}

/// The mapping between our message types and `kafka-protocol`'s for the value conformance
/// test: the file `kafka-wire/tests/value_conformance/generated.rs`.
pub fn generate_values(specs_dirs: &[PathBuf]) -> Result<GeneratedFile, GenError> {
    let specs = load_specs(specs_dirs)?;
    Ok(GeneratedFile {
        name: "generated.rs".to_string(),
        contents: values::values_file(&specs),
    })
}

const HEADER: &str =
    "// Generated by kafka-wire-codegen from Apache Kafka's JSON message specs; do not edit.\n\
// Regenerate with: cargo run -p kafka-wire-codegen -- <specs dir>...\n";

fn mod_file(specs: &[Spec]) -> String {
    let mut s = String::new();
    s.push_str(HEADER);
    s.push_str(
        "\n//! Every request and response message, one module per message, and the dispatch\n\
         //! enums [`RequestBody`] and [`ResponseBody`] keyed by [`ApiKey`].\n\n",
    );
    s.push_str("use bytes::Buf;\n\n");
    s.push_str(
        "use crate::api::ApiKey;\nuse crate::encode::{Decode, Encode, Message, WireWrite};\n",
    );
    s.push_str("use crate::{DecodeError, EncodeError};\n\n");
    for spec in specs {
        let m = model::snake(&spec.name);
        let _ = writeln!(s, "pub mod {m};");
    }
    s.push('\n');
    for spec in specs {
        let m = model::snake(&spec.name);
        let _ = writeln!(s, "pub use {m}::{};", spec.name);
    }
    // Pair requests and responses by API key.
    let mut by_key: BTreeMap<i16, (Option<&Spec>, Option<&Spec>)> = BTreeMap::new();
    for spec in specs {
        if let Some(k) = spec.api_key {
            let e = by_key.entry(k).or_default();
            if spec.is_request {
                e.0 = Some(spec);
            } else {
                e.1 = Some(spec);
            }
        }
    }
    for (kind, idx) in [("Request", 0usize), ("Response", 1usize)] {
        let lower = kind.to_lowercase();
        let _ = writeln!(
            s,
            "\n/// A {lower} body of any API this crate implements.\n\
             #[derive(Debug, Clone, PartialEq)]\n#[non_exhaustive]\npub enum {kind}Body {{"
        );
        let mut rows = Vec::new();
        for pair in by_key.values() {
            let spec = if idx == 0 { pair.0 } else { pair.1 };
            if let Some(spec) = spec {
                let variant = spec.name.trim_end_matches(kind).to_string();
                let _ = writeln!(
                    s,
                    "    /// A `{}`.\n    {variant}({}),",
                    spec.name, spec.name
                );
                rows.push((variant, spec.name.clone()));
            }
        }
        s.push_str("}\n\n");
        let _ = writeln!(s, "impl {kind}Body {{");
        s.push_str("    /// The API of this body.\n    pub fn api_key(&self) -> ApiKey {\n        match self {\n");
        for (v, n) in &rows {
            let _ = writeln!(s, "            Self::{v}(_) => {n}::API_KEY,");
        }
        s.push_str("        }\n    }\n\n");
        let _ = writeln!(
            s,
            "    /// Reads the {lower} body of `api_key` at `version`.\n    \
             pub fn decode<B: Buf>(api_key: ApiKey, version: i16, buf: &mut B) -> Result<Self, DecodeError> {{\n        \
             match api_key {{"
        );
        for (v, n) in &rows {
            let _ = writeln!(
                s,
                "            ApiKey::{v} => {n}::decode(buf, version).map(Self::{v}),"
            );
        }
        s.push_str("        }\n    }\n\n");
        s.push_str("    /// Writes this body at `version`.\n    pub fn encode<W: WireWrite>(&self, w: &mut W, version: i16) -> Result<(), EncodeError> {\n        match self {\n");
        for (v, _) in &rows {
            let _ = writeln!(s, "            Self::{v}(m) => m.encode(w, version),");
        }
        s.push_str("        }\n    }\n\n");
        let _ = writeln!(
            s,
            "    /// A pseudo-random {lower} body of `api_key` holding only fields that exist at `version`.\n    \
             #[cfg(feature = \"sample\")]\n    \
             pub fn sample(api_key: ApiKey, version: i16, g: &mut crate::sample::Gen) -> Self {{\n        \
             match api_key {{"
        );
        for (v, n) in &rows {
            let _ = writeln!(
                s,
                "            ApiKey::{v} => Self::{v}({n}::sample(g, version)),"
            );
        }
        s.push_str("        }\n    }\n\n");
        s.push_str("    /// The encoded size of this body at `version`.\n    pub fn encoded_len(&self, version: i16) -> Result<usize, EncodeError> {\n        match self {\n");
        for (v, _) in &rows {
            let _ = writeln!(s, "            Self::{v}(m) => m.encoded_len(version),");
        }
        s.push_str("        }\n    }\n}\n");
    }
    s
}

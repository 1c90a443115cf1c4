//! Emits the field-by-field mapping between `kafka-wire`'s message types and those of the
//! `kafka-protocol` crate, for the value conformance test (`kafka-wire/tests/value_conformance`):
//! for each struct, an `Arb` impl building a pseudo-random `kafka-protocol` value holding only
//! the fields of a version, and a `Same` impl comparing one of our values with one of theirs,
//! field by field, at that version. The scalar impls (newtypes, strings, arrays, tagged
//! fields) are written by hand in the test; type inference picks them per field.

use std::fmt::Write as _;

use crate::emit::{cond, is_option, neg, Cond};
use crate::model::{snake, Field, Spec};

/// `kafka-protocol`'s name of a field whose snake-case name is a Rust keyword (`type_` is
/// its `_type`).
fn their_name(ours: &str) -> String {
    match ours.strip_suffix('_') {
        Some(k) => format!("_{k}"),
        None => ours.to_string(),
    }
}

/// Fields of our specs that `kafka-protocol` 0.15.1 does not have (added in versions beyond
/// its range): never generated or compared; the comparison asserts it never runs at a version
/// that has them.
const NOT_IN_KAFKA_PROTOCOL: &[(&str, &str)] = &[("ListOffsetsRequest", "TimeoutMs")];

fn missing(st: &str, f: &Field) -> bool {
    NOT_IN_KAFKA_PROTOCOL.contains(&(st, f.name.as_str()))
}

fn arb_expr(f: &Field, spec: &Spec) -> String {
    let v = "Arb::arb(g, version)".to_string();
    if !is_option(f) {
        return v;
    }
    match cond(&f.nullable.and(&f.versions), &spec.valid) {
        Cond::Never => format!("Some({v})"),
        Cond::Always => format!("if g.chance(4) {{ None }} else {{ Some({v}) }}"),
        Cond::Expr(e) => format!("if ({e}) && g.chance(4) {{ None }} else {{ Some({v}) }}"),
    }
}

fn present(f: &Field, spec: &Spec) -> crate::model::Range {
    match f.tag {
        None => f.versions,
        Some((_, tv)) => tv.and(&f.versions).and(&spec.flexible),
    }
}

/// The mapping code of one message.
pub(crate) fn message_values(out: &mut String, spec: &Spec) {
    let m = snake(&spec.name);
    let valid = &spec.valid;
    let flex_min = if spec.flexible.is_empty() {
        i16::MAX
    } else {
        spec.flexible.lo
    };
    for st in &spec.structs {
        let name = &st.name;
        let ours = format!("kafka_wire::messages::{m}::{name}");
        let theirs = format!("kafka_protocol::messages::{m}::{name}");
        // Arb: their value.
        let _ = writeln!(
            out,
            "impl Arb for {theirs} {{\n    #[allow(unused_variables)]\n    fn arb(g: &mut KpGen, version: i16) -> Self {{\n        \
             let mut this = Self::default();"
        );
        for f in st.fields.iter().filter(|f| !missing(name, f)) {
            let fname = their_name(&snake(&f.name));
            let chance = if f.tag.is_some() { "g.chance(2)" } else { "" };
            let expr = arb_expr(f, spec);
            match (cond(&present(f, spec), valid), chance.is_empty()) {
                (Cond::Never, _) => {}
                (Cond::Always, true) => {
                    let _ = writeln!(out, "        this.{fname} = {expr};");
                }
                (Cond::Always, false) => {
                    let _ = writeln!(
                        out,
                        "        if {chance} {{\n            this.{fname} = {expr};\n        }}"
                    );
                }
                (Cond::Expr(e), true) => {
                    let _ = writeln!(
                        out,
                        "        if {e} {{\n            this.{fname} = {expr};\n        }}"
                    );
                }
                (Cond::Expr(e), false) => {
                    let _ = writeln!(
                        out,
                        "        if {e} && {chance} {{\n            this.{fname} = {expr};\n        }}"
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "        if version >= {flex_min} {{\n            this.unknown_tagged_fields = g.unknown_tags();\n        }}\n        this\n    }}\n}}\n"
        );
        // Same: ours against theirs.
        let _ = writeln!(
            out,
            "impl Same<{theirs}> for {ours} {{\n    #[allow(unused_variables)]\n    fn same(&self, theirs: &{theirs}, version: i16, at: &str, out: &mut Vec<String>) {{"
        );
        for f in &st.fields {
            let o = snake(&f.name);
            let t = their_name(&o);
            if missing(name, f) {
                let msg =
                    format!("\"{o} exists at v{{version}}; kafka-protocol has no such field\"");
                match cond(&present(f, spec), valid) {
                    Cond::Never => {}
                    Cond::Always => {
                        let _ = writeln!(out, "        panic!({msg});");
                    }
                    Cond::Expr(e) => {
                        let _ = writeln!(out, "        assert!({}, {msg});", neg(&e));
                    }
                }
                continue;
            }
            let stmt =
                format!("self.{o}.same(&theirs.{t}, version, &format!(\"{{at}}.{o}\"), out);");
            match cond(&present(f, spec), valid) {
                Cond::Never => {}
                Cond::Always => {
                    let _ = writeln!(out, "        {stmt}");
                }
                Cond::Expr(e) => {
                    let _ = writeln!(out, "        if {e} {{\n            {stmt}\n        }}");
                }
            }
        }
        let _ = writeln!(
            out,
            "        if version >= {flex_min} {{\n            self.unknown_tagged_fields.same(&theirs.unknown_tagged_fields, version, &format!(\"{{at}}.unknown_tagged_fields\"), out);\n        }}\n    }}\n}}\n"
        );
    }
}

/// The whole generated file of the value conformance test.
pub(crate) fn values_file(specs: &[Spec]) -> String {
    let mut s = String::new();
    s.push_str(crate::HEADER);
    s.push_str(
        "\n//! The field-by-field mapping between `kafka-wire`'s messages and `kafka-protocol`'s:\n\
         //! `Arb` (a pseudo-random value of theirs holding only a version's fields) and `Same`\n\
         //! (ours against theirs at a version) for every struct of every message.\n\n\
         use super::{Arb, KpGen, Same};\n\n",
    );
    // `kafka-protocol` has no types for data records (they are not part of its message set).
    for spec in specs.iter().filter(|s| !s.is_data) {
        message_values(&mut s, spec);
    }
    s
}

//! Emits `fn sample(g, version)` for each struct: a pseudo-random value holding only the
//! fields that exist at `version` (behind the `sample` feature of `kafka-wire`).

use std::fmt::Write as _;

use crate::emit::{cond, is_option, Cond};
use crate::model::{snake, Field, Range, Spec, Struct, Ty};

fn sample_scalar(t: &Ty) -> String {
    match t {
        Ty::Bool => "g.bool()".into(),
        Ty::Int8 => "g.i8()".into(),
        Ty::Int16 => "g.i16()".into(),
        Ty::Uint16 => "g.u16()".into(),
        Ty::Int32 => "g.i32()".into(),
        Ty::Uint32 => "g.u32()".into(),
        Ty::Int64 => "g.i64()".into(),
        Ty::Float64 => "g.f64()".into(),
        Ty::Uuid => "g.uuid()".into(),
        Ty::String => "g.string()".into(),
        Ty::Bytes | Ty::Records => "g.bytes()".into(),
        Ty::Struct(n) => format!("{n}::sample(g, version)"),
        Ty::Array(inner) => format!(
            "(0..g.array_len()).map(|_| {}).collect()",
            sample_scalar(inner)
        ),
    }
}

fn sample_expr(f: &Field, valid: &Range) -> String {
    let v = sample_scalar(&f.ty);
    if !is_option(f) {
        return v;
    }
    match cond(&f.nullable.and(&f.versions), valid) {
        Cond::Never => format!("Some({v})"),
        Cond::Always => format!("if g.chance(4) {{ None }} else {{ Some({v}) }}"),
        Cond::Expr(e) => format!("if ({e}) && g.chance(4) {{ None }} else {{ Some({v}) }}"),
    }
}

pub(crate) fn emit_sample(out: &mut String, spec: &Spec, st: &Struct) {
    let valid = &spec.valid;
    let flex_min = if spec.flexible.is_empty() {
        i16::MAX
    } else {
        spec.flexible.lo
    };
    let flex_test = if spec.flexible.is_empty() {
        "false".to_string()
    } else {
        format!("version >= {flex_min}")
    };
    let _ = writeln!(
        out,
        "#[cfg(feature = \"sample\")]\nimpl {} {{\n    /// A pseudo-random value holding only fields that exist at `version`.\n    \
         pub fn sample(g: &mut crate::sample::Gen, version: i16) -> Self {{\n        \
         let flexible = {flex_test};\n        let mut this = Self::default();",
        st.name
    );
    for f in &st.fields {
        let fname = snake(&f.name);
        let present = match f.tag {
            None => f.versions,
            Some((_, tv)) => tv.and(&f.versions).and(&spec.flexible),
        };
        let fv = valid.and(&f.versions);
        let chance = if f.tag.is_some() {
            " && g.chance(2)"
        } else {
            ""
        };
        match cond(&present, valid) {
            Cond::Never => {}
            Cond::Always if chance.is_empty() => {
                let _ = writeln!(out, "        this.{fname} = {};", sample_expr(f, &fv));
            }
            Cond::Always => {
                let _ = writeln!(
                    out,
                    "        if g.chance(2) {{\n            this.{fname} = {};\n        }}",
                    sample_expr(f, &fv)
                );
            }
            Cond::Expr(e) => {
                let _ = writeln!(
                    out,
                    "        if {e}{chance} {{\n            this.{fname} = {};\n        }}",
                    sample_expr(f, &fv)
                );
            }
        }
    }
    out.push_str("        if flexible {\n            this.unknown_tagged_fields = g.unknown_tags();\n        }\n        this\n    }\n}\n\n");
}

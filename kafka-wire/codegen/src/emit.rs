//! Turns a parsed [`Spec`] into the Rust source of one message module.

use std::fmt::Write as _;

use crate::model::{snake, Field, Range, Spec, Struct, Ty};

/// The one decoder with a planted bug behind the `never-in-production` feature: the struct
/// and its two same-typed fields that the decoder swaps when a test asks it to.
fn mutation(name: &str) -> Option<(&'static str, &'static str)> {
    (name == "LeaderAndIsrPartitionState").then_some(("leader_epoch", "partition_epoch"))
}

/// A version condition, simplified against the message's valid versions.
pub(crate) enum Cond {
    Always,
    Never,
    Expr(String),
}

pub(crate) fn cond(r: &Range, valid: &Range) -> Cond {
    let r = r.and(valid);
    if r.is_empty() {
        Cond::Never
    } else if r.lo <= valid.lo && r.hi >= valid.hi {
        Cond::Always
    } else if r.hi >= valid.hi {
        Cond::Expr(format!("version >= {}", r.lo))
    } else if r.lo <= valid.lo {
        Cond::Expr(format!("version <= {}", r.hi))
    } else {
        Cond::Expr(format!("({}..={}).contains(&version)", r.lo, r.hi))
    }
}

/// The negation of a condition expression made by [`cond`].
pub(crate) fn neg(e: &str) -> String {
    if let Some(n) = e.strip_prefix("version >= ") {
        format!("version < {n}")
    } else if let Some(n) = e.strip_prefix("version <= ") {
        format!("version > {n}")
    } else {
        format!("!{e}")
    }
}

pub(crate) fn is_option(f: &Field) -> bool {
    matches!(f.ty, Ty::Records) || !f.nullable.and(&f.versions).is_empty()
}

fn elem_ty(t: &Ty) -> String {
    match t {
        Ty::Bool => "bool".into(),
        Ty::Int8 => "i8".into(),
        Ty::Int16 => "i16".into(),
        Ty::Uint16 => "u16".into(),
        Ty::Int32 => "i32".into(),
        Ty::Uint32 => "u32".into(),
        Ty::Int64 => "i64".into(),
        Ty::Float64 => "f64".into(),
        Ty::String => "ByteString".into(),
        Ty::Uuid => "Uuid".into(),
        Ty::Bytes | Ty::Records => "Bytes".into(),
        Ty::Array(inner) if **inner == Ty::Int32 => "Int32Array".into(),
        Ty::Array(inner) => format!("Vec<{}>", elem_ty(inner)),
        Ty::Struct(n) => n.clone(),
    }
}

fn rust_ty(f: &Field) -> String {
    let base = elem_ty(&f.ty);
    if is_option(f) {
        format!("Option<{base}>")
    } else {
        base
    }
}

fn default_expr(f: &Field) -> String {
    let wrap = |x: String| {
        if is_option(f) {
            format!("Some({x})")
        } else {
            x
        }
    };
    let d = f.default.as_deref();
    match &f.ty {
        Ty::Records => "None".into(),
        Ty::Bool => d.unwrap_or("false").into(),
        Ty::Int8 | Ty::Int16 | Ty::Uint16 | Ty::Int32 | Ty::Uint32 | Ty::Int64 => {
            d.unwrap_or("0").into()
        }
        Ty::Float64 => match d {
            Some(x) if x.contains('.') => x.into(),
            Some(x) => format!("{x}.0"),
            None => "0.0".into(),
        },
        Ty::String => match d {
            Some("null") => "None".into(),
            Some(x) if !x.is_empty() => wrap(format!("ByteString::from_static({x:?})")),
            _ => wrap("ByteString::new()".into()),
        },
        Ty::Bytes => match d {
            Some("null") => "None".into(),
            _ => wrap("Bytes::new()".into()),
        },
        Ty::Uuid => "Uuid::ZERO".into(),
        Ty::Array(inner) => match d {
            Some("null") => "None".into(),
            _ if **inner == Ty::Int32 => wrap("Int32Array::new()".into()),
            _ => wrap("Vec::new()".into()),
        },
        Ty::Struct(n) => format!("{n}::default()"),
    }
}

/// An expression that is true when `val` differs from the field's default.
fn non_default(f: &Field, val: &str) -> String {
    match (&f.ty, is_option(f)) {
        (Ty::Bool, _) => {
            if f.default.as_deref() == Some("true") {
                format!("!{val}")
            } else {
                val.to_string()
            }
        }
        (Ty::Array(_), false) => format!("!{val}.is_empty()"),
        (Ty::Records, _) => format!("{val}.is_some()"),
        _ if default_expr(f) == "None" => format!("{val}.is_some()"),
        _ => format!("{val} != {}", default_expr(f)),
    }
}

fn min_elem(t: &Ty) -> String {
    match t {
        Ty::Bool | Ty::Int8 => "1".into(),
        Ty::Int16 | Ty::Uint16 => "2".into(),
        Ty::Int32 | Ty::Uint32 => "4".into(),
        Ty::Int64 | Ty::Float64 => "8".into(),
        Ty::Uuid => "16".into(),
        Ty::String => "if flexible { 1 } else { 2 }".into(),
        Ty::Bytes | Ty::Records | Ty::Array(_) => "if flexible { 1 } else { 4 }".into(),
        Ty::Struct(n) => format!("{n}::min_len(version)"),
    }
}

fn read_scalar(t: &Ty, b: &str, what: &str) -> String {
    match t {
        Ty::Bool => format!("get_bool({b})"),
        Ty::Int8 => format!("get_i8({b})"),
        Ty::Int16 => format!("get_i16({b})"),
        Ty::Uint16 => format!("get_u16({b})"),
        Ty::Int32 => format!("get_i32({b})"),
        Ty::Uint32 => format!("get_u32({b})"),
        Ty::Int64 => format!("get_i64({b})"),
        Ty::Float64 => format!("get_f64({b})"),
        Ty::Uuid => format!("get_uuid({b})"),
        Ty::String => format!("get_string({b}, flexible, {what:?})"),
        Ty::Bytes | Ty::Records => format!("get_bytes({b}, flexible, {what:?})"),
        Ty::Struct(n) => format!("{n}::decode({b}, version)"),
        Ty::Array(_) => unreachable_nested(),
    }
}

fn unreachable_nested() -> String {
    "compile_error!(\"nested arrays are not supported\")".into()
}

fn elem_reader(t: &Ty, what: &str) -> String {
    match t {
        Ty::Bool => "get_bool".into(),
        Ty::Int8 => "get_i8".into(),
        Ty::Int16 => "get_i16".into(),
        Ty::Uint16 => "get_u16".into(),
        Ty::Int32 => "get_i32".into(),
        Ty::Uint32 => "get_u32".into(),
        Ty::Int64 => "get_i64".into(),
        Ty::Float64 => "get_f64".into(),
        Ty::Uuid => "get_uuid".into(),
        _ => format!("|b| {}", read_scalar(t, "b", what)),
    }
}

/// The expression reading field `f` from `b` (including `?`).
fn read_expr(f: &Field, b: &str, valid: &Range) -> String {
    let what = snake(&f.name);
    let nc = cond(&f.nullable.and(&f.versions), valid);
    let opt = is_option(f);
    let (nullable_read, plain_read) = match &f.ty {
        Ty::String => (
            format!("get_nullable_string({b}, flexible, {what:?})?"),
            format!("get_string({b}, flexible, {what:?})?"),
        ),
        Ty::Bytes | Ty::Records => (
            format!("get_nullable_bytes({b}, flexible, {what:?})?"),
            format!("get_bytes({b}, flexible, {what:?})?"),
        ),
        Ty::Array(inner) => {
            let min = min_elem(inner);
            let er = elem_reader(inner, &what);
            if let Ty::Struct(n) = &**inner {
                let er = format!("|b, slot: &mut {n}| {n}::decode_into(slot, b, version)");
                (
                    format!("get_nullable_struct_array({b}, flexible, {min}, {what:?}, {er})?"),
                    format!("get_struct_array({b}, flexible, {min}, {what:?}, {er})?"),
                )
            } else if **inner == Ty::Int32 {
                (
                    format!("get_nullable_int32_array({b}, flexible, {what:?})?"),
                    format!("get_int32_array({b}, flexible, {what:?})?"),
                )
            } else {
                (
                    format!("get_nullable_array({b}, flexible, {min}, {what:?}, {er})?"),
                    format!("get_array({b}, flexible, {min}, {what:?}, {er})?"),
                )
            }
        }
        t => return format!("{}?", read_scalar(t, b, &what)),
    };
    if !opt {
        return plain_read;
    }
    match nc {
        Cond::Always => nullable_read,
        Cond::Never => format!("Some({plain_read})"),
        Cond::Expr(e) => format!("if {e} {{ {nullable_read} }} else {{ Some({plain_read}) }}"),
    }
}

/// Bytes of the stack buffer that the elements of an array of small structs go through.
const ARRAY_BUFFER: usize = 512;

/// The structs of `spec` whose fields are all fixed-width, strings or arrays of those (no
/// byte, record or struct fields): an array of them is written through kafka-wire's
/// `BufferedWriter`.
fn small_structs(spec: &Spec) -> Vec<String> {
    let small = |t: &Ty| matches!(t, Ty::String) || fixed_size(t).is_some();
    spec.structs
        .iter()
        .filter(|st| {
            st.fields.iter().all(|f| match &f.ty {
                Ty::Array(inner) => small(inner),
                t => small(t),
            })
        })
        .map(|st| st.name.clone())
        .collect()
}

/// Statements writing the value `val` (a place expression such as `self.x`) to `w`; arrays of
/// the `small` structs go through a stack buffer.
fn write_stmts(
    f: &Field,
    val: &str,
    w: &str,
    valid: &Range,
    indent: &str,
    small: &[String],
) -> String {
    let what = snake(&f.name);
    let mut s = String::new();
    let opt = is_option(f);
    if opt {
        match cond(&f.nullable.and(&f.versions), valid) {
            Cond::Always => {}
            Cond::Never => {
                let _ = writeln!(
                    s,
                    "{indent}if {val}.is_none() {{ return Err(EncodeError::NullNotAllowed {{ field: {what:?}, version }}); }}"
                );
            }
            Cond::Expr(e) => {
                let _ = writeln!(
                    s,
                    "{indent}if {val}.is_none() && {} {{ return Err(EncodeError::NullNotAllowed {{ field: {what:?}, version }}); }}",
                    neg(&e)
                );
            }
        }
    }
    let scalar = |t: &Ty, v: &str| -> String {
        match t {
            Ty::Bool => format!("put_bool({w}, {v});"),
            Ty::Int8 => format!("{w}.write_i8({v});"),
            Ty::Int16 => format!("{w}.write_i16({v});"),
            Ty::Uint16 => format!("{w}.write_u16({v});"),
            Ty::Int32 => format!("{w}.write_i32({v});"),
            Ty::Uint32 => format!("{w}.write_u32({v});"),
            Ty::Int64 => format!("{w}.write_i64({v});"),
            Ty::Float64 => format!("{w}.write_f64({v});"),
            Ty::Uuid => format!("put_uuid({w}, &{v});"),
            Ty::String => format!("put_string({w}, &{v}, flexible, {what:?})?;"),
            Ty::Bytes => format!("put_bytes({w}, &{v}, flexible, false, {what:?})?;"),
            Ty::Records => format!("put_bytes({w}, &{v}, flexible, true, {what:?})?;"),
            Ty::Struct(_) => format!("{v}.encode({w}, version)?;"),
            Ty::Array(_) => unreachable_nested(),
        }
    };
    match &f.ty {
        Ty::String if opt => {
            let _ = writeln!(
                s,
                "{indent}put_nullable_string({w}, {val}.as_deref(), flexible, {what:?})?;"
            );
        }
        Ty::Bytes | Ty::Records if opt => {
            let shared = matches!(f.ty, Ty::Records);
            let _ = writeln!(
                s,
                "{indent}put_nullable_bytes({w}, {val}.as_ref(), flexible, {shared}, {what:?})?;"
            );
        }
        Ty::Array(inner) => {
            let deref = match **inner {
                Ty::Bool
                | Ty::Int8
                | Ty::Int16
                | Ty::Uint16
                | Ty::Int32
                | Ty::Uint32
                | Ty::Int64
                | Ty::Float64 => "*e",
                _ => "e",
            };
            if **inner == Ty::Int32 {
                if opt {
                    let _ = writeln!(
                        s,
                        "{indent}match &{val} {{\n{indent}    None => put_array_len({w}, None, flexible, {what:?})?,\n\
                         {indent}    Some(v) => put_int32_array({w}, v, flexible, {what:?})?,\n{indent}}}"
                    );
                } else {
                    let _ = writeln!(
                        s,
                        "{indent}put_int32_array({w}, &{val}, flexible, {what:?})?;"
                    );
                }
                return s;
            }
            let body = match **inner {
                Ty::Uuid => format!("put_uuid({w}, e);"),
                Ty::String => format!("put_string({w}, e, flexible, {what:?})?;"),
                _ => scalar(inner, deref),
            };
            let buffered = matches!(&**inner, Ty::Struct(n) if small.contains(n));
            let each = |v: &str| {
                if buffered {
                    format!(
                        "let mut bw = BufferedWriter::<_, {ARRAY_BUFFER}>::new(&mut *{w});\n{indent}    \
                         for e in {v} {{ bw.encode_element(e, version)?; }}\n{indent}    bw.finish();"
                    )
                } else {
                    format!("for e in {v} {{ {body} }}")
                }
            };
            if opt {
                let each = each("v").replace("\n", "\n    ");
                let _ = writeln!(
                    s,
                    "{indent}match &{val} {{\n{indent}    None => put_array_len({w}, None, flexible, {what:?})?,\n\
                     {indent}    Some(v) => {{\n{indent}        put_array_len({w}, Some(v.len()), flexible, {what:?})?;\n\
                     {indent}        {each}\n{indent}    }}\n{indent}}}"
                );
            } else if buffered {
                let _ = writeln!(
                    s,
                    "{indent}put_array_len({w}, Some({val}.len()), flexible, {what:?})?;\n\
                     {indent}{{\n{indent}    {}\n{indent}}}",
                    each(&format!("&{val}"))
                );
            } else {
                let _ = writeln!(
                    s,
                    "{indent}put_array_len({w}, Some({val}.len()), flexible, {what:?})?;\n\
                     {indent}{}",
                    each(&format!("&{val}"))
                );
            }
        }
        t => {
            let _ = writeln!(s, "{indent}{}", scalar(t, val));
        }
    }
    s
}

/// Encoded size of a fixed-width type.
fn fixed_size(t: &Ty) -> Option<usize> {
    match t {
        Ty::Bool | Ty::Int8 => Some(1),
        Ty::Int16 | Ty::Uint16 => Some(2),
        Ty::Int32 | Ty::Uint32 => Some(4),
        Ty::Int64 | Ty::Float64 => Some(8),
        Ty::Uuid => Some(16),
        _ => None,
    }
}

/// Runs of consecutive always-present fixed-width fields (two or more), as (start, end)
/// indexes into `fields`.
fn fixed_runs(fields: &[&Field], valid: &Range) -> Vec<(usize, usize)> {
    let fixed =
        |f: &Field| fixed_size(&f.ty).is_some() && matches!(cond(&f.versions, valid), Cond::Always);
    let mut runs = Vec::new();
    let mut i = 0;
    while i < fields.len() {
        if fixed(fields[i]) {
            let mut j = i;
            while j < fields.len() && fixed(fields[j]) {
                j += 1;
            }
            if j - i >= 2 {
                runs.push((i, j));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    runs
}

/// Statements reading a run of fixed-width fields from `buf` with one length check.
fn read_fixed_run(run: &[&Field], buf: &str) -> String {
    let total: usize = run.iter().filter_map(|f| fixed_size(&f.ty)).sum();
    let mut fast = String::new();
    let mut slow = String::new();
    let mut o = 0;
    for f in run {
        let n = fixed_size(&f.ty).unwrap_or(0);
        let bytes = (o..o + n)
            .map(|k| format!("c[{k}]"))
            .collect::<Vec<_>>()
            .join(", ");
        let fname = snake(&f.name);
        let expr = match f.ty {
            Ty::Bool => format!("c[{o}] != 0"),
            Ty::Uuid => format!("Uuid([{bytes}])"),
            Ty::Int8 => format!("i8::from_be_bytes([{bytes}])"),
            Ty::Int16 => format!("i16::from_be_bytes([{bytes}])"),
            Ty::Uint16 => format!("u16::from_be_bytes([{bytes}])"),
            Ty::Int32 => format!("i32::from_be_bytes([{bytes}])"),
            Ty::Uint32 => format!("u32::from_be_bytes([{bytes}])"),
            Ty::Int64 => format!("i64::from_be_bytes([{bytes}])"),
            _ => format!("f64::from_be_bytes([{bytes}])"),
        };
        let _ = writeln!(fast, "                this.{fname} = {expr};");
        let _ = writeln!(
            slow,
            "                this.{fname} = {}?;",
            read_scalar(&f.ty, buf, &fname)
        );
        o += n;
    }
    format!(
        "        {{\n            let c = {buf}.chunk();\n            if c.len() >= {total} {{\n{fast}                {buf}.advance({total});\n            }} else {{\n{slow}            }}\n        }}\n"
    )
}

/// Statements writing a run of fixed-width fields as one array.
fn write_fixed_run(run: &[&Field]) -> String {
    let total: usize = run.iter().filter_map(|f| fixed_size(&f.ty)).sum();
    let mut s = format!("        {{\n            let mut run = [0u8; {total}];\n");
    let mut o = 0;
    for f in run {
        let n = fixed_size(&f.ty).unwrap_or(0);
        let fname = snake(&f.name);
        let bytes = match f.ty {
            Ty::Bool => format!("[u8::from(self.{fname})]"),
            Ty::Uuid => format!("self.{fname}.0"),
            _ => format!("self.{fname}.to_be_bytes()"),
        };
        let _ = writeln!(
            s,
            "            run[{o}..{}].copy_from_slice(&{bytes});",
            o + n
        );
        o += n;
    }
    s.push_str("            w.write_slice(&run);\n        }\n");
    s
}

/// Whether a field of type `t` is read without byte strings: fixed-width, or an array of
/// fixed-width elements (such fields can be read from a plain byte slice).
fn is_plain(t: &Ty) -> bool {
    match t {
        Ty::Array(inner) => fixed_size(inner).is_some(),
        t => fixed_size(t).is_some(),
    }
}

/// Whether `f` is a nullable array of structs: such arrays are mostly null or empty (aborted
/// transactions), which a run reads over the input slice; any other length makes the decoder
/// read the run field by field.
fn is_optional_struct_array(f: &Field) -> bool {
    matches!(&f.ty, Ty::Array(inner) if matches!(**inner, Ty::Struct(_))) && is_option(f)
}

/// The expression reading field `f` from the slice `c` with the fast readers (including `?`,
/// which gives up the fast read of the run).
fn fast_expr(f: &Field, valid: &Range) -> String {
    let nc = cond(&f.nullable.and(&f.versions), valid);
    let opt = is_option(f);
    let (nullable, plain) = match &f.ty {
        Ty::Array(inner) => match &**inner {
            Ty::Struct(_) => (
                "fast_nullable_empty_array(c, flexible)?".to_string(),
                "fast_empty_array(c, flexible)?".to_string(),
            ),
            Ty::Int32 => (
                "fast_nullable_int32_array(c, flexible)?".to_string(),
                "fast_int32_array(c, flexible)?".to_string(),
            ),
            t => {
                let n = fixed_size(t).unwrap_or(0);
                let conv = match t {
                    Ty::Bool => format!("|b: [u8; {n}]| b[0] != 0"),
                    Ty::Uuid => "Uuid".to_string(),
                    t => format!("{}::from_be_bytes", elem_ty(t)),
                };
                (
                    format!("fast_nullable_fixed_array(c, flexible, {conv})?"),
                    format!("fast_fixed_array(c, flexible, {conv})?"),
                )
            }
        },
        Ty::Bool => return "fast_bool(c)?".into(),
        Ty::Uuid => return "fast_uuid(c)?".into(),
        t => return format!("fast_{}(c)?", elem_ty(t)),
    };
    if !opt {
        return plain;
    }
    match nc {
        Cond::Always => nullable,
        Cond::Never => format!("Some({plain})"),
        Cond::Expr(e) => format!("if {e} {{ {nullable} }} else {{ Some({plain}) }}"),
    }
}

/// Statements reading `fields` from the slice `c` with the fast readers (runs of fixed-width
/// fields with one length check).
fn fast_read_fields(out: &mut String, fields: &[&Field], valid: &Range) {
    let runs = fixed_runs(fields, valid);
    for (i, f) in fields.iter().enumerate() {
        if let Some(&(a, b)) = runs.iter().find(|r| r.0 <= i && i < r.1) {
            if a == i {
                let run = &fields[a..b];
                let total: usize = run.iter().filter_map(|f| fixed_size(&f.ty)).sum();
                let _ = writeln!(
                    out,
                    "        {{\n            let (h, r) = c.split_first_chunk::<{total}>()?;\n            *c = r;"
                );
                let mut o = 0;
                for f in run {
                    let n = fixed_size(&f.ty).unwrap_or(0);
                    let bytes = (o..o + n)
                        .map(|k| format!("h[{k}]"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let expr = match f.ty {
                        Ty::Bool => format!("h[{o}] != 0"),
                        Ty::Uuid => format!("Uuid([{bytes}])"),
                        ref t => format!("{}::from_be_bytes([{bytes}])", elem_ty(t)),
                    };
                    let _ = writeln!(out, "            this.{} = {expr};", snake(&f.name));
                    o += n;
                }
                out.push_str("        }\n");
            }
            continue;
        }
        let fname = snake(&f.name);
        match cond(&f.versions, valid) {
            Cond::Never => {}
            Cond::Always => {
                let _ = writeln!(
                    out,
                    "        this.{fname} = {};",
                    fast_expr(f, &valid.and(&f.versions))
                );
            }
            Cond::Expr(e) => {
                let _ = writeln!(
                    out,
                    "        if {e} {{\n            this.{fname} = {};\n        }}",
                    fast_expr(f, &valid.and(&f.versions))
                );
            }
        }
    }
}

/// Runs of consecutive plain fields (see [`is_plain`]) present at some valid version, as
/// (start, end) indexes into `fields`: two or more fields, or one at the end of the struct
/// when the struct has flexible versions (the run then also reads the tag count).
fn plain_runs(fields: &[&Field], valid: &Range, has_flexible: bool) -> Vec<(usize, usize)> {
    let plain = |f: &Field| {
        (is_plain(&f.ty) || is_optional_struct_array(f))
            && !matches!(cond(&f.versions, valid), Cond::Never)
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < fields.len() {
        if plain(fields[i]) {
            let mut j = i;
            while j < fields.len()
                && (plain(fields[j]) || matches!(cond(&fields[j].versions, valid), Cond::Never))
            {
                j += 1;
            }
            if j - i >= 2 || (j == fields.len() && has_flexible) {
                runs.push((i, j));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    runs
}

/// Statements reading `fields` from `buf` (runs of fixed-width fields with one length check).
fn read_fields(out: &mut String, fields: &[&Field], valid: &Range, buf: &str) {
    let runs = fixed_runs(fields, valid);
    for (i, f) in fields.iter().enumerate() {
        if let Some(&(a, b)) = runs.iter().find(|r| r.0 <= i && i < r.1) {
            if a == i {
                out.push_str(&read_fixed_run(&fields[a..b], buf));
            }
            continue;
        }
        let fname = snake(&f.name);
        match cond(&f.versions, valid) {
            Cond::Never => {}
            Cond::Always => {
                let _ = writeln!(
                    out,
                    "        this.{fname} = {};",
                    read_expr(f, buf, &valid.and(&f.versions))
                );
            }
            Cond::Expr(e) => {
                let _ = writeln!(
                    out,
                    "        if {e} {{\n            this.{fname} = {};\n        }}",
                    read_expr(f, buf, &valid.and(&f.versions))
                );
            }
        }
    }
}

/// `text` with every non-empty line indented four more spaces.
fn indent4(text: &str) -> String {
    let mut s = String::new();
    for line in text.lines() {
        if !line.is_empty() {
            s.push_str("    ");
        }
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn doc(s: &mut String, indent: &str, text: &str) {
    let text = text.trim();
    let text = if text.is_empty() {
        "(no description)"
    } else {
        text
    };
    let _ = writeln!(s, "{indent}/// {}", text.replace('\n', " "));
}

fn range_text(r: &Range) -> String {
    if r.is_empty() {
        "none".into()
    } else if r.hi == i16::MAX {
        format!("{}+", r.lo)
    } else if r.lo == r.hi {
        format!("{}", r.lo)
    } else {
        format!("{}-{}", r.lo, r.hi)
    }
}

fn emit_struct(out: &mut String, spec: &Spec, st: &Struct, top: bool) {
    let valid = &spec.valid;
    let flex_min = if spec.flexible.is_empty() {
        i16::MAX
    } else {
        spec.flexible.lo
    };
    // No flexible version at all: a constant, not a comparison clippy calls absurd.
    let flex_test = if spec.flexible.is_empty() {
        "false".to_string()
    } else {
        format!("version >= {flex_min}")
    };
    let name = &st.name;
    // struct definition
    doc(out, "", &st.about);
    let _ = writeln!(
        out,
        "#[derive(Debug, Clone, PartialEq)]\npub struct {name} {{"
    );
    for f in &st.fields {
        doc(out, "    ", &f.about);
        let mut notes = format!("Versions {}", range_text(&f.versions));
        if !f.nullable.is_empty() {
            let _ = write!(notes, ", nullable {}", range_text(&f.nullable));
        }
        if let Some((tag, tv)) = &f.tag {
            let _ = write!(notes, ", tagged (tag {tag}) {}", range_text(tv));
        }
        if f.ignorable {
            notes.push_str(", ignorable");
        }
        let _ = writeln!(out, "    ///\n    /// {notes}.");
        let _ = writeln!(out, "    pub {}: {},", snake(&f.name), rust_ty(f));
    }
    out.push_str("    /// Tagged fields this version does not know, kept to be written back.\n");
    out.push_str("    pub unknown_tagged_fields: UnknownTaggedFields,\n}\n\n");

    // Default
    let _ = writeln!(
        out,
        "impl Default for {name} {{\n    #[inline]\n    fn default() -> Self {{\n        Self {{"
    );
    for f in &st.fields {
        let _ = writeln!(out, "            {}: {},", snake(&f.name), default_expr(f));
    }
    out.push_str(
        "            unknown_tagged_fields: UnknownTaggedFields::new(),\n        }\n    }\n}\n\n",
    );

    // min_len
    let _ = writeln!(
        out,
        "impl {name} {{\n    /// The fewest bytes one value takes at `version` (bounds array counts before allocating).\n    \
         pub fn min_len(version: i16) -> usize {{\n        let flexible = {flex_test};\n        let mut n = 0;"
    );
    for f in st.fields.iter().filter(|f| f.tag.is_none()) {
        let m = min_elem(&match &f.ty {
            Ty::Array(_) => Ty::Bytes,
            t => t.clone(),
        });
        match cond(&f.versions, valid) {
            Cond::Always => {
                let _ = writeln!(out, "        n += {m};");
            }
            Cond::Never => {}
            Cond::Expr(e) => {
                let _ = writeln!(out, "        if {e} {{\n            n += {m};\n        }}");
            }
        }
    }
    out.push_str("        if flexible {\n            n += 1;\n        }\n        n\n    }\n}\n\n");

    let api_key_check = |err: &str| -> String {
        if top {
            format!(
                "        if !({}..={}).contains(&version) {{\n            return Err({err}::UnsupportedVersion {{ api_key: {}, version }});\n        }}\n",
                valid.lo,
                valid.hi,
                spec.api_key.unwrap_or(-1)
            )
        } else {
            String::new()
        }
    };

    // Decode
    let _ = writeln!(
        out,
        "impl Decode for {name} {{\n    fn decode<B: Buf>(buf: &mut B, version: i16) -> Result<Self, DecodeError> {{"
    );
    out.push_str(&api_key_check("DecodeError"));
    out.push_str(
        "        let mut this = Self::default();\n        Self::decode_into(&mut this, buf, version)?;\n        Ok(this)\n    }\n}\n\n",
    );
    let _ = writeln!(
        out,
        "impl {name} {{\n    /// Reads a value into `this`, which holds the defaults (in place: no move of the value).\n    \
         #[doc(hidden)]\n    pub fn decode_into<B: Buf>(this: &mut Self, buf: &mut B, version: i16) -> Result<(), DecodeError> {{"
    );
    let _ = writeln!(out, "        let flexible = {flex_test};");
    let non_tagged: Vec<&Field> = st.fields.iter().filter(|f| f.tag.is_none()).collect();
    // Runs of plain fields are read over the input chunk as a byte slice (one advance per run);
    // a run at the end of the struct also reads the tag count, which it returns.
    let runs = plain_runs(&non_tagged, valid, !spec.flexible.is_empty());
    let mut tag_count_read = false;
    let mut slow_fns = String::new();
    let mut i = 0;
    while i < non_tagged.len() {
        let Some(&(a, b)) = runs.iter().find(|r| r.0 == i) else {
            read_fields(out, &non_tagged[i..=i], valid, "buf");
            i += 1;
            continue;
        };
        let run = &non_tagged[a..b];
        let end = b;
        let ends = end == non_tagged.len() && !spec.flexible.is_empty();
        // A run with an array of structs is read again through `buf` itself (so that byte
        // fields inside its elements stay slices of the input), else over the input chunk.
        let via_buf = run.iter().any(|f| is_optional_struct_array(f));
        let rb = if via_buf { "buf" } else { "b" };
        let mut slow = String::new();
        read_fields(&mut slow, &non_tagged[a..end], valid, rb);
        if ends {
            tag_count_read = true;
            let _ = writeln!(
                slow,
                "        if flexible {{ get_uvarint({rb})? }} else {{ 0 }}"
            );
        }
        let mut fast = String::new();
        fast_read_fields(&mut fast, run, valid);
        out.push_str(
            "        // The run read over the input as one slice with the read position in a\n        \
             // register; when that gives up, field by field.\n        \
             let fast = (|| -> Option<(usize, u32)> {\n            \
             let chunk = buf.chunk();\n            \
             if chunk.len() != buf.remaining() {\n                return None;\n            }\n            \
             let mut rest: &[u8] = chunk;\n            let c = &mut rest;\n",
        );
        out.push_str(&indent4(&fast));
        if ends {
            out.push_str(
                "            let tag_count = if flexible { fast_uvarint(c)? } else { 0 };\n",
            );
        } else {
            out.push_str("            let tag_count = 0;\n");
        }
        out.push_str("            Some((chunk.len() - c.len(), tag_count))\n        })();\n");
        let slow_block = if via_buf {
            format!("{{\n{}        }}", indent4(&slow))
        } else {
            format!("over_chunk!(buf, |b| {{\n{}        }})", indent4(&slow))
        };
        // The field-by-field read is a function of its own, out of the way of the fast one's
        // registers.
        let slow_fn = format!("decode_run_{a}");
        let value = if ends { "let tag_count = " } else { "" };
        let ret = if ends { "tag_count" } else { "0" };
        let _ = writeln!(
            slow_fns,
            "\n    /// Reads `{}` to `{}` field by field (where the read over one slice gives up).\n    \
             #[cold]\n    #[inline(never)]\n    #[allow(unused_variables)]\n    \
             fn {slow_fn}<B: Buf>(this: &mut Self, buf: &mut B, version: i16) -> Result<u32, DecodeError> {{\n        \
             let flexible = {flex_test};\n        {value}{slow_block};\n        Ok({ret})\n    }}",
            snake(&non_tagged[a].name),
            snake(&non_tagged[end - 1].name),
        );
        let _ = writeln!(
            out,
            "        {value}match fast {{\n            Some((used, tag_count)) => {{\n                \
             buf.advance(used);\n                tag_count\n            }}\n            \
             None => Self::{slow_fn}(this, buf, version)?,\n        }};"
        );
        i = end;
    }
    let mut tagged: Vec<&Field> = st.fields.iter().filter(|f| f.tag.is_some()).collect();
    tagged.sort_by_key(|f| f.tag.map(|t| t.0));
    if tag_count_read {
        out.push_str("        {\n            for _ in 0..tag_count {\n");
    } else {
        out.push_str("        if flexible {\n            let tag_count = get_uvarint(buf)?;\n            for _ in 0..tag_count {\n");
    }
    out.push_str("                let (tag, size) = get_tag_header(buf)?;\n");
    let mut arms = String::new();
    for f in &tagged {
        let Some((tag, tv)) = f.tag else { continue };
        let fname = snake(&f.name);
        let present = tv.and(&f.versions).and(&spec.flexible);
        let guard = match cond(&present, valid) {
            Cond::Never => continue,
            Cond::Always => String::new(),
            Cond::Expr(e) => format!(" if {e}"),
        };
        let _ = writeln!(
            arms,
            "                    {tag}{guard} => {{\n                        this.{fname} = get_tagged(buf, size, |b| Ok({}))?;\n                    }}",
            read_expr(f, "b", &valid.and(&f.versions))
        );
    }
    if arms.is_empty() {
        out.push_str(
            "                this.unknown_tagged_fields.push(get_raw_tagged(buf, tag, size));\n",
        );
    } else {
        out.push_str("                match tag {\n");
        out.push_str(&arms);
        out.push_str(
            "                    _ => this.unknown_tagged_fields.push(get_raw_tagged(buf, tag, size)),\n                }\n",
        );
    }
    out.push_str("            }\n        }\n");
    if let Some((a, b)) = mutation(&st.name) {
        let _ = writeln!(
            out,
            "        // A planted bug for the value conformance test to catch; off unless a test\n        \
             // turns it on for its thread (feature `never-in-production`).\n        \
             #[cfg(feature = \"never-in-production\")]\n        \
             if crate::never_in_production::decoder_swaps_epochs() {{\n            \
             std::mem::swap(&mut this.{a}, &mut this.{b});\n        }}"
        );
    }
    out.push_str("        Ok(())\n    }\n");
    out.push_str(&slow_fns);
    out.push_str("}\n\n");

    // Encode
    let small = small_structs(spec);
    // The elements of an array of small structs are encoded in the array's loop, where the
    // position of the writer stays in a register.
    let inline = if small.contains(&st.name) {
        "    #[inline(always)]\n"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "impl Encode for {name} {{\n{inline}    fn encode<W: WireWrite>(&self, w: &mut W, version: i16) -> Result<(), EncodeError> {{"
    );
    out.push_str(&api_key_check("EncodeError"));
    let _ = writeln!(out, "        let flexible = {flex_test};");
    // Runs of always-present fixed-width fields go out as one write of a stack array.
    let write_runs = fixed_runs(&non_tagged, valid);
    for (i, f) in non_tagged.iter().enumerate() {
        if let Some(&(a, b)) = write_runs.iter().find(|r| r.0 <= i && i < r.1) {
            if a == i {
                out.push_str(&write_fixed_run(&non_tagged[a..b]));
            }
            continue;
        }
        let fname = snake(&f.name);
        let val = format!("self.{fname}");
        let not_in = if f.ignorable {
            None
        } else {
            Some(format!(
                "if {} {{\n            return Err(EncodeError::FieldNotInVersion {{ field: {fname:?}, version }});\n        }}",
                non_default(f, &val)
            ))
        };
        match cond(&f.versions, valid) {
            Cond::Always => out.push_str(&write_stmts(
                f,
                &val,
                "w",
                &valid.and(&f.versions),
                "        ",
                &small,
            )),
            Cond::Never => {
                if let Some(n) = not_in {
                    let _ = writeln!(out, "        {n}");
                }
            }
            Cond::Expr(e) => {
                let _ = writeln!(out, "        if {e} {{");
                out.push_str(&write_stmts(
                    f,
                    &val,
                    "w",
                    &valid.and(&f.versions),
                    "            ",
                    &small,
                ));
                match not_in {
                    Some(n) => {
                        let n = n.replace("\n        ", "\n            ");
                        let _ = writeln!(out, "        }} else {n}");
                    }
                    None => out.push_str("        }\n"),
                }
            }
        }
    }
    // tagged section
    out.push_str("        if flexible {\n");
    let mut has_vars = Vec::new();
    for f in &tagged {
        let Some((_, tv)) = f.tag else { continue };
        let fname = snake(&f.name);
        let present = tv.and(&f.versions).and(&spec.flexible);
        let val = format!("self.{fname}");
        let pc = match cond(&present, valid) {
            Cond::Never => continue,
            Cond::Always => String::new(),
            Cond::Expr(e) => format!("({e}) && "),
        };
        let _ = writeln!(
            out,
            "            let has_{fname} = {pc}{};",
            non_default(f, &val)
        );
        has_vars.push(format!("usize::from(has_{fname})"));
    }
    let mut count = String::from("self.unknown_tagged_fields.len()");
    for h in &has_vars {
        let _ = write!(count, " + {h}");
    }
    if tagged.is_empty() {
        out.push_str("            put_unknown_tagged_fields(w, &self.unknown_tagged_fields)?;\n");
    } else {
        let _ = writeln!(
            out,
            "            let n = {count};\n            let n = u32::try_from(n).map_err(|_| EncodeError::TooLong {{ what: \"tagged fields\", length: n }})?;\n            w.write_unsigned_varint(n);"
        );
        out.push_str("            let mut next = 0;\n");
        for f in &tagged {
            let Some((tag, tv)) = f.tag else { continue };
            let fname = snake(&f.name);
            let present = tv.and(&f.versions).and(&spec.flexible);
            if matches!(cond(&present, valid), Cond::Never) {
                continue;
            }
            let val = format!("self.{fname}");
            let _ = writeln!(
                out,
                "            if has_{fname} {{\n                put_unknown_tagged_below(w, &self.unknown_tagged_fields, &mut next, {tag});\n                w.write_unsigned_varint({tag});\n                let mut c = LenCounter(0);\n                {{\n                    let w = &mut c;\n{}                }}\n                w.write_unsigned_varint(c.0 as u32);\n{}            }}",
                write_stmts(f, &val, "w", &valid.and(&f.versions), "                    ", &small),
                write_stmts(f, &val, "w", &valid.and(&f.versions), "                ", &small)
            );
        }
        out.push_str(
            "            put_unknown_tagged_below(w, &self.unknown_tagged_fields, &mut next, u64::MAX);\n",
        );
    }
    out.push_str("        } else if !self.unknown_tagged_fields.is_empty() {\n            return Err(EncodeError::FieldNotInVersion { field: \"unknown_tagged_fields\", version });\n        }\n");
    // known tagged fields that are not in this version
    for f in &tagged {
        let Some((_, tv)) = f.tag else { continue };
        if f.ignorable {
            continue;
        }
        let fname = snake(&f.name);
        let present = tv.and(&f.versions).and(&spec.flexible);
        let val = format!("self.{fname}");
        let absent = match cond(&present, valid) {
            Cond::Always => continue,
            Cond::Never => String::new(),
            Cond::Expr(e) => format!("{} && ", neg(&e)),
        };
        let _ = writeln!(
            out,
            "        if {absent}{} {{\n            return Err(EncodeError::FieldNotInVersion {{ field: {fname:?}, version }});\n        }}",
            non_default(f, &val)
        );
    }
    out.push_str("        Ok(())\n    }\n}\n\n");

    if top && spec.is_data {
        let _ = writeln!(
            out,
            "impl DataRecord for {name} {{\n    const MIN_VERSION: i16 = {};\n    const MAX_VERSION: i16 = {};\n    const FLEXIBLE_MIN: i16 = {flex_min};\n}}\n",
            valid.lo,
            valid.hi
        );
    } else if top {
        let _ = writeln!(
            out,
            "impl Message for {name} {{\n    const API_KEY: ApiKey = ApiKey::{};\n    const MIN_VERSION: i16 = {};\n    const MAX_VERSION: i16 = {};\n    const FLEXIBLE_MIN: i16 = {flex_min};\n}}\n",
            spec.name
                .trim_end_matches("Request")
                .trim_end_matches("Response"),
            valid.lo,
            valid.hi
        );
    }
}

/// The Rust source of one message module.
pub fn message_file(spec: &Spec) -> Result<String, String> {
    let api_key = match spec.api_key {
        Some(k) => Some(k),
        None if spec.is_data => None,
        None => return Err(format!("{} has no apiKey", spec.name)),
    };
    for st in &spec.structs {
        for f in &st.fields {
            if let Ty::Array(inner) = &f.ty {
                if matches!(**inner, Ty::Array(_) | Ty::Records) {
                    return Err(format!("{}.{}: unsupported element type", st.name, f.name));
                }
            }
        }
    }
    let mut out = String::new();
    out.push_str(crate::HEADER);
    let flex = range_text(&spec.flexible);
    let what = match api_key {
        Some(k) => format!("api key {k}"),
        None => "a versioned data record".to_string(),
    };
    // With no flexible version a record of one version never reads `version`.
    let extra_allow = if spec.flexible.is_empty() {
        ", unused_variables"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "\n//! `{}` ({what}): versions {}, flexible versions {flex}.\n\n\
         #![allow(clippy::field_reassign_with_default, clippy::needless_question_mark, clippy::derivable_impls, clippy::redundant_closure_call)]\n#![allow(unused_imports{extra_allow})]\n\n\
         use bytes::{{Buf, Bytes}};\nuse bytestring::ByteString;\n\n\
         use crate::api::ApiKey;\nuse crate::encode::{{BufferedWriter, DataRecord, Decode, Encode, LenCounter, Message, WireWrite}};\n\
         use crate::primitives::*;\nuse crate::varint::get_unsigned_varint;\nuse crate::{{DecodeError, EncodeError}};\n",
        spec.name,
        range_text(&spec.valid)
    );
    for (i, st) in spec.structs.iter().enumerate() {
        emit_struct(&mut out, spec, st, i == 0);
        crate::sample::emit_sample(&mut out, spec, st);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(out)
}

//! The parsed form of a message spec: version ranges, field types and structs.

use serde_json::Value;

/// An inclusive version range; `hi == i16::MAX` is open-ended, `lo > hi` is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Lowest version.
    pub lo: i16,
    /// Highest version.
    pub hi: i16,
}

impl Range {
    /// The empty range.
    pub const NONE: Range = Range { lo: 1, hi: 0 };

    /// Parses `"3+"`, `"0-2"`, `"5"` or `"none"`.
    pub fn parse(s: &str) -> Result<Range, String> {
        let s = s.trim();
        if s == "none" {
            return Ok(Range::NONE);
        }
        let num = |t: &str| {
            t.trim()
                .parse::<i16>()
                .map_err(|e| format!("bad version {s:?}: {e}"))
        };
        if let Some(lo) = s.strip_suffix('+') {
            Ok(Range {
                lo: num(lo)?,
                hi: i16::MAX,
            })
        } else if let Some((lo, hi)) = s.split_once('-') {
            Ok(Range {
                lo: num(lo)?,
                hi: num(hi)?,
            })
        } else {
            let v = num(s)?;
            Ok(Range { lo: v, hi: v })
        }
    }

    /// Whether no version is in the range.
    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }

    /// The intersection of two ranges.
    pub fn and(&self, o: &Range) -> Range {
        Range {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    /// Whether `o` lies within `self`.
    pub fn covers(&self, o: &Range) -> bool {
        o.is_empty() || (self.lo <= o.lo && self.hi >= o.hi)
    }
}

/// The type of a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    /// `bool`
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `uint16`
    Uint16,
    /// `int32`
    Int32,
    /// `uint32`
    Uint32,
    /// `int64`
    Int64,
    /// `float64`
    Float64,
    /// `string`
    String,
    /// `uuid`
    Uuid,
    /// `bytes`
    Bytes,
    /// `records`
    Records,
    /// `[]T`
    Array(Box<Ty>),
    /// A struct, by name.
    Struct(String),
}

impl Ty {
    fn parse(s: &str) -> Ty {
        if let Some(inner) = s.strip_prefix("[]") {
            return Ty::Array(Box::new(Ty::parse(inner)));
        }
        match s {
            "bool" => Ty::Bool,
            "int8" => Ty::Int8,
            "int16" => Ty::Int16,
            "uint16" => Ty::Uint16,
            "int32" => Ty::Int32,
            "uint32" => Ty::Uint32,
            "int64" => Ty::Int64,
            "float64" => Ty::Float64,
            "string" => Ty::String,
            "uuid" => Ty::Uuid,
            "bytes" => Ty::Bytes,
            "records" => Ty::Records,
            other => Ty::Struct(other.to_string()),
        }
    }
}

/// One field of a struct.
#[derive(Debug, Clone)]
pub struct Field {
    /// Name as in the spec (PascalCase).
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// Versions in which it exists.
    pub versions: Range,
    /// Versions in which it may be null.
    pub nullable: Range,
    /// Tag and tagged versions, for a tagged field.
    pub tag: Option<(u32, Range)>,
    /// Whether encoding may silently drop it at versions without it.
    pub ignorable: bool,
    /// The custom default, as written in the spec.
    pub default: Option<String>,
    /// The spec's description.
    pub about: String,
}

/// A struct: the message itself or a nested / common struct.
#[derive(Debug, Clone)]
pub struct Struct {
    /// Rust and spec name.
    pub name: String,
    /// Its fields in wire order.
    pub fields: Vec<Field>,
    /// Description (from the field that declares it).
    pub about: String,
}

/// A parsed request or response spec.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Message name, e.g. `FetchRequest`.
    pub name: String,
    /// API key.
    pub api_key: Option<i16>,
    /// Request (true) or response.
    pub is_request: bool,
    /// A versioned data record (`"type": "data"`, e.g. the records of `__consumer_offsets`)
    /// rather than a request or response.
    pub is_data: bool,
    /// Valid versions.
    pub valid: Range,
    /// Flexible versions.
    pub flexible: Range,
    /// Every struct, the message first.
    pub structs: Vec<Struct>,
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn parse_fields(
    fields: &Value,
    structs: &mut Vec<Struct>,
    pending_common: &mut Vec<String>,
) -> Result<Vec<Field>, String> {
    let arr = fields.as_array().ok_or("fields is not an array")?;
    let mut out = Vec::new();
    for f in arr {
        let name = s(f, "name").ok_or("field without name")?.to_string();
        let ty_s = s(f, "type").ok_or_else(|| format!("{name}: no type"))?;
        let ty = Ty::parse(ty_s);
        let versions =
            Range::parse(s(f, "versions").ok_or_else(|| format!("{name}: no versions"))?)?;
        let nullable = match s(f, "nullableVersions") {
            Some(r) => Range::parse(r)?,
            None => Range::NONE,
        };
        let tag = match f.get("tag").and_then(Value::as_u64) {
            Some(t) => {
                let tv = Range::parse(s(f, "taggedVersions").ok_or("tag without taggedVersions")?)?;
                Some((u32::try_from(t).map_err(|e| e.to_string())?, tv))
            }
            None => None,
        };
        let ignorable = f.get("ignorable").and_then(Value::as_bool).unwrap_or(false);
        // Most specs write defaults as strings ("-1"); some (the `__consumer_offsets` records)
        // as JSON numbers or booleans.
        let default = match f.get("default") {
            Some(Value::String(d)) => Some(d.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        };
        let about = s(f, "about").unwrap_or("").to_string();
        let struct_name = match &ty {
            Ty::Struct(n) => Some(n.clone()),
            Ty::Array(inner) => match &**inner {
                Ty::Struct(n) => Some(n.clone()),
                _ => None,
            },
            _ => None,
        };
        if let Some(sn) = struct_name {
            if let Some(sub) = f.get("fields") {
                let fields = parse_fields(sub, structs, pending_common)?;
                if structs.iter().any(|x| x.name == sn) {
                    return Err(format!("struct {sn} defined twice"));
                }
                structs.push(Struct {
                    name: sn,
                    fields,
                    about: about.clone(),
                });
            } else if !pending_common.contains(&sn) {
                pending_common.push(sn);
            }
        }
        out.push(Field {
            name,
            ty,
            versions,
            nullable,
            tag,
            ignorable,
            default,
            about,
        });
    }
    Ok(out)
}

/// Parses one spec (comments already stripped).
pub fn parse_spec(v: &Value) -> Result<Spec, String> {
    let name = s(v, "name").ok_or("no name")?.to_string();
    let kind = s(v, "type").ok_or("no type")?;
    let (is_request, is_data) = match kind {
        "request" => (true, false),
        "response" => (false, false),
        "data" => (false, true),
        other => return Err(format!("unsupported message type {other}")),
    };
    let api_key = v
        .get("apiKey")
        .and_then(Value::as_i64)
        .map(|k| i16::try_from(k).map_err(|e| e.to_string()))
        .transpose()?;
    let valid = Range::parse(s(v, "validVersions").ok_or("no validVersions")?)?;
    let flexible = Range::parse(s(v, "flexibleVersions").unwrap_or("none"))?;
    let mut structs = Vec::new();
    let mut pending = Vec::new();
    let fields = parse_fields(
        v.get("fields").ok_or("no fields")?,
        &mut structs,
        &mut pending,
    )?;
    let mut all = vec![Struct {
        name: name.clone(),
        fields,
        about: format!("The body of a {name}."),
    }];
    all.append(&mut structs);
    if let Some(common) = v.get("commonStructs").and_then(Value::as_array) {
        for c in common {
            let cname = s(c, "name")
                .ok_or("common struct without name")?
                .to_string();
            let mut nested = Vec::new();
            let fields = parse_fields(
                c.get("fields").ok_or("no fields")?,
                &mut nested,
                &mut pending,
            )?;
            all.append(&mut nested);
            all.push(Struct {
                name: cname.clone(),
                fields,
                about: format!("The common struct {cname}."),
            });
        }
    }
    for p in &pending {
        if !all.iter().any(|x| &x.name == p) {
            return Err(format!("struct {p} is never defined"));
        }
    }
    Ok(Spec {
        name,
        api_key,
        is_request,
        is_data,
        valid,
        flexible,
        structs: all,
    })
}

/// `PascalCase` or `camelCase` to `snake_case`, treating acronyms as words.
pub fn snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = if i > 0 {
                chars.get(i - 1).copied()
            } else {
                None
            };
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                None => false,
                Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_ascii_uppercase() => next.is_some_and(|n| n.is_ascii_lowercase()),
                _ => false,
            };
            if boundary {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    match out.as_str() {
        "type" | "match" | "ref" | "self" | "mod" | "fn" | "use" | "impl" | "struct" | "enum" => {
            format!("{out}_")
        }
        _ => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_names() {
        assert_eq!(snake("isKRaftController"), "is_k_raft_controller");
        assert_eq!(snake("TopicId"), "topic_id");
        assert_eq!(snake("V0Host"), "v0_host");
        assert_eq!(snake("Type"), "type_");
        assert_eq!(snake("LeaderAndIsrRequest"), "leader_and_isr_request");
    }

    #[test]
    fn version_ranges() {
        assert_eq!(
            Range::parse("3+").unwrap(),
            Range {
                lo: 3,
                hi: i16::MAX
            }
        );
        assert_eq!(Range::parse("0-2").unwrap(), Range { lo: 0, hi: 2 });
        assert!(Range::parse("none").unwrap().is_empty());
    }
}

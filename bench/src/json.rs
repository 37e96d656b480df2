//! JSON, written by hand: flat objects from the children, nested ones for the report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A JSON value.
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Num(f64),
    Str(String),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn opt(v: Option<f64>) -> Json {
        v.filter(|v| v.is_finite()).map_or(Json::Null, Json::Num)
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(n) if n.is_finite() => {
                if n.fract() == 0.0 && n.abs() < 1e15 {
                    let _ = write!(out, "{}", *n as i64);
                } else {
                    let _ = write!(out, "{:.3}", n);
                }
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&"  ".repeat(indent + 1));
                    Json::Str(k.clone()).write(out, 0);
                    out.push_str(": ");
                    v.write(out, indent + 1);
                }
                if !fields.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push('}');
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    /// One line, for the children's `RESULT` lines.
    pub fn render_compact(&self) -> String {
        self.render()
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Builds a JSON object.
pub fn obj(fields: Vec<(&str, Json)>) -> Json {
    Json::Obj(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Parses a JSON object of numbers, strings, nulls and nested objects (what the children
/// print) into a flat map; nested keys are joined with dots (`"a": {"b": 1}` gives `a.b`).
pub fn parse_flat_json(line: &str) -> BTreeMap<String, Json> {
    let mut map = BTreeMap::new();
    let mut chars = line.trim().chars().peekable();
    if chars.next() == Some('{') {
        parse_object(&mut chars, "", &mut map);
    }
    map
}

/// Parses the members of an object whose `{` was consumed, up to its `}`.
fn parse_object(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    prefix: &str,
    map: &mut BTreeMap<String, Json>,
) {
    fn read_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => s.push('\n'),
                    Some(other) => s.push(other),
                    None => break,
                },
                c => s.push(c),
            }
        }
        s
    }
    loop {
        while matches!(chars.peek(), Some(c) if *c != '"' && *c != '}') {
            chars.next();
        }
        if chars.next() != Some('"') {
            return;
        }
        let key = format!("{prefix}{}", read_string(chars));
        while matches!(chars.peek(), Some(c) if c.is_whitespace() || *c == ':') {
            chars.next();
        }
        match chars.peek() {
            Some('"') => {
                chars.next();
                map.insert(key, Json::Str(read_string(chars)));
            }
            Some('{') => {
                chars.next();
                parse_object(chars, &format!("{key}."), map);
            }
            _ => {
                let mut raw = String::new();
                while let Some(c) = chars.next_if(|c| *c != ',' && *c != '}') {
                    raw.push(c);
                }
                map.insert(key, raw.trim().parse::<f64>().map_or(Json::Null, Json::Num));
            }
        }
    }
}

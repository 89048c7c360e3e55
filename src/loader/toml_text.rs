//! Hand-rolled pieces of TOML used on the hot path of big tables: escaping a
//! string for writing, and strictly reading a single-line key/value. Anything
//! this reader does not recognise is left to the `toml` crate, so strictness is
//! never traded for speed.

/// Writes `s` as a TOML basic string (with quotes) into `out`.
pub fn push_basic_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A value the fast reader understands.
#[derive(Debug, Clone, PartialEq)]
pub enum FastValue {
    Str(String),
    Pair(String, String),
    Num(f64),
}

/// Reads a canonical decimal key (`0`, `17`; no sign, no leading zeros).
pub fn parse_id_key(key: &str) -> Option<usize> {
    let b = key.as_bytes();
    if b.is_empty() || b.len() > 12 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    key.parse().ok()
}

/// Parses one line `KEY = VALUE` where VALUE is a string, a two-string array,
/// or a number. Returns `None` for anything else (the caller then uses `toml`).
pub fn parse_line(line: &str) -> Option<(usize, FastValue)> {
    let eq = line.find(" = ")?;
    let id = parse_id_key(&line[..eq])?;
    let rest = &line[eq + 3..];
    let value = if rest.starts_with('"') {
        let (s, tail) = parse_basic_string(rest)?;
        if !tail.is_empty() {
            return None;
        }
        FastValue::Str(s)
    } else if let Some(inner) = rest.strip_prefix('[') {
        let (a, tail) = parse_basic_string(inner)?;
        let tail = tail.strip_prefix(", ")?;
        let (b, tail) = parse_basic_string(tail)?;
        if tail != "]" {
            return None;
        }
        FastValue::Pair(a, b)
    } else {
        FastValue::Num(parse_number(rest)?)
    };
    Some((id, value))
}

fn parse_number(s: &str) -> Option<f64> {
    match s {
        "inf" | "+inf" => return Some(f64::INFINITY),
        "-inf" => return Some(f64::NEG_INFINITY),
        "nan" | "+nan" | "-nan" => return Some(f64::NAN),
        _ => {}
    }
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let int_ok = digits(int) && !(int.len() > 1 && int.starts_with('0'));
    let frac_ok = frac.is_none_or(digits);
    let exp_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    if !(int_ok && frac_ok && exp_ok) {
        return None;
    }
    s.parse().ok()
}

/// Parses a TOML basic string at the start of `s`; returns it and the rest.
fn parse_basic_string(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut out = String::with_capacity(body.len().min(64));
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'b' => out.push('\u{8}'),
                    't' => out.push('\t'),
                    'n' => out.push('\n'),
                    'f' => out.push('\u{c}'),
                    'r' => out.push('\r'),
                    'e' => out.push('\u{1b}'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut v = 0u32;
                        for _ in 0..n {
                            v = v * 16 + chars.next()?.1.to_digit(16)?;
                        }
                        out.push(char::from_u32(v)?);
                    }
                    _ => return None,
                }
            }
            c if c != '\t' && ((c as u32) < 0x20 || c as u32 == 0x7f) => return None,
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_strings_read_back_like_the_toml_crate_reads_them() {
        let samples = [
            "plain",
            "Ġthe",
            "q\"uote",
            "back\\slash",
            "\n\t\r\u{1}\u{7f}",
            "ü日本",
            "",
        ];
        for s in samples {
            let mut line = String::from("7 = ");
            push_basic_string(&mut line, s);
            let (id, v) = parse_line(&line).expect("fast path");
            assert_eq!((id, v), (7, FastValue::Str(s.to_string())));
            let t: toml::Table = toml::from_str(&line).unwrap();
            assert_eq!(t["7"].as_str(), Some(s));
        }
    }

    #[test]
    fn numbers_follow_toml_grammar() {
        for (txt, ok) in [
            ("-1.5", true),
            ("1e-5", true),
            ("0", true),
            ("01", false),
            (".5", false),
            ("1.", false),
            ("-inf", true),
            ("infinity", false),
        ] {
            assert_eq!(parse_number(txt).is_some(), ok, "{txt}");
            let via_toml = toml::from_str::<toml::Table>(&format!("a = {txt}")).is_ok();
            assert_eq!(via_toml, ok, "toml disagrees on {txt}");
        }
    }

    #[test]
    fn keys_must_be_canonical_ids() {
        assert_eq!(parse_id_key("0"), Some(0));
        assert_eq!(parse_id_key("151643"), Some(151643));
        assert_eq!(parse_id_key("01"), None);
        assert_eq!(parse_id_key("-1"), None);
        assert_eq!(parse_id_key("a"), None);
    }
}

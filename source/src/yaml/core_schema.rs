//! The YAML 1.2 core schema for plain scalars: `null`, booleans, decimal,
//! octal (`0o`) and hexadecimal (`0x`) integers, and floats; anything else
//! is a string. Numbers JSON cannot hold (`.inf`, `.nan`, integers outside
//! 64 bits) are refused with a sentence.

use serde_json::{Number, Value};

/// Resolves a plain scalar under the YAML 1.2 core schema. `Err` carries a
/// sentence for numbers JSON cannot hold.
pub fn resolve_plain(text: &str) -> Result<Value, String> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let negative = text.starts_with('-');
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Err(format!("`{text}` is not a finite number"));
    }
    let is_dec = !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit());
    if is_dec {
        if negative {
            return text
                .parse::<i64>()
                .map(|n| Value::Number(n.into()))
                .map_err(|_| format!("the integer `{text}` is outside the 64-bit range"));
        }
        return unsigned
            .parse::<u64>()
            .map(|n| Value::Number(n.into()))
            .map_err(|_| format!("the integer `{text}` is outside the 64-bit range"));
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return u64::from_str_radix(oct, 8)
                .map(|n| Value::Number(n.into()))
                .map_err(|_| format!("the integer `{text}` is outside the 64-bit range"));
        }
    }
    if let Some(hexa) = text.strip_prefix("0x") {
        if !hexa.is_empty() && hexa.bytes().all(|b| b.is_ascii_hexdigit()) {
            return u64::from_str_radix(hexa, 16)
                .map(|n| Value::Number(n.into()))
                .map_err(|_| format!("the integer `{text}` is outside the 64-bit range"));
        }
    }
    if is_core_float(unsigned) {
        let f: f64 = text
            .parse()
            .map_err(|_| format!("`{text}` is not a number"))?;
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("`{text}` is not a finite number"));
    }
    Ok(Value::String(text.to_owned()))
}

/// `( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?` (sign removed).
fn is_core_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac),
        Some((int, frac)) => !int.is_empty() && digits(int) && digits(frac),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = match exponent {
        None => true,
        Some(e) => {
            let e = e.strip_prefix(['-', '+']).unwrap_or(e);
            !e.is_empty() && digits(e)
        }
    };
    mantissa_ok && exponent_ok
}

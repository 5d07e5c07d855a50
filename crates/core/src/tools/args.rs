//! Argument validation for the tools: each problem is an [`ArgProblem`] (data), never text.
//! `sessions_list` and `sessions_read` stop at the first problem; the send tools collect them all
//! (`tools::send::parse_args`).

use serde_json::{Map, Value};

use crate::outcome::{ArgProblem, Refusal};
use crate::render::list::describe;
use crate::tools::Tool;

/// A `bad-argument` refusal of one problem (the `sessions_list` / `sessions_read` form: no usage line).
pub fn refuse(p: ArgProblem) -> Refusal {
    Refusal::BadArgument {
        problems: vec![p],
        usage: None,
    }
}

/// The argument object, refusing a non-object and any argument name not in `allowed`.
pub fn object<'a>(
    args: &'a Value,
    tool: Tool,
    allowed: &'static [&'static str],
) -> Result<Option<&'a Map<String, Value>>, ArgProblem> {
    let map = match args {
        Value::Null => return Ok(None),
        Value::Object(m) => m,
        other => {
            return Err(ArgProblem::invalid(
                "the arguments",
                "a JSON object",
                describe(other),
                Some(format!("{} takes {}.", tool.name(), allowed.join(", "))),
            ))
        }
    };
    let mut unknown: Vec<&String> = map
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err(ArgProblem::NotAnArgument {
            name: (*k).clone(),
            tool,
            allowed,
        });
    }
    Ok(Some(map))
}

/// The value of `name`, `None` when absent or `null`.
pub fn present<'a>(map: Option<&'a Map<String, Value>>, name: &str) -> Option<&'a Value> {
    map.and_then(|m| m.get(name)).filter(|v| !v.is_null())
}

pub fn opt_string(
    map: Option<&Map<String, Value>>,
    name: &str,
    hint: &str,
) -> Result<Option<String>, ArgProblem> {
    match present(map, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(ArgProblem::invalid(
            name,
            "a string",
            describe(v),
            Some(hint.into()),
        )),
    }
}

pub fn opt_bool(map: Option<&Map<String, Value>>, name: &str) -> Result<Option<bool>, ArgProblem> {
    match present(map, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ArgProblem::invalid(
            name,
            "true or false",
            describe(v),
            Some("Omit it for the default.".into()),
        )),
    }
}

/// An integer in `lo..=hi` (an integral float such as `5.0` counts).
pub fn opt_int(
    map: Option<&Map<String, Value>>,
    name: &str,
    lo: u64,
    hi: u64,
) -> Result<Option<u64>, ArgProblem> {
    let Some(v) = present(map, name) else {
        return Ok(None);
    };
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 1e15)
            .map(|f| f as u64)
    });
    match n {
        Some(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(ArgProblem::invalid(
            name,
            format!("an integer from {lo} to {hi}"),
            describe(v),
            Some("Omit it for the default.".into()),
        )),
    }
}

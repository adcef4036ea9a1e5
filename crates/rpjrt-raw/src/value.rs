//! Typed values for plugin attributes, device attributes and client create options (the
//! `rpjrt` crate re-exports [`Value`] and [`ClientOptions`]). Plain data, checked on the
//! host: the layer that calls the plugin converts them to and from
//! [`NamedValue`](crate::util::NamedValue).

use std::fmt;

/// One value of a PJRT named value: what plugins report as attributes and take as
/// create options.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    String(String),
    /// A 64-bit integer.
    Int64(i64),
    /// A list of 64-bit integers.
    Int64List(Vec<i64>),
    /// A 32-bit float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write!(f, "{s:?}"),
            Value::Int64(v) => write!(f, "{v}"),
            Value::Int64List(v) => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "[{}]", parts.join(", "))
            }
            // Debug keeps the point (2.0, not 2) and writes extremes as exponents.
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::String(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int64(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int64(v.into())
    }
}
impl From<Vec<i64>> for Value {
    fn from(v: Vec<i64>) -> Value {
        Value::Int64List(v)
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Float(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

/// Typed create options for `rpjrt::Client::new`: `ClientOptions::new().set("cpu_device_count", 8)`.
///
/// Besides the plugin's named options, [`ClientOptions::cache_dir`] turns rpjrt's persistent
/// compile cache on for the new client (it is never sent to the plugin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientOptions {
    entries: Vec<(String, Value)>,
    cache_dir: Option<std::path::PathBuf>,
}

impl ClientOptions {
    /// No options.
    pub fn new() -> ClientOptions {
        ClientOptions::default()
    }

    /// Sets (or replaces) one option.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<Value>) -> ClientOptions {
        let name = name.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((name, value)),
        }
        self
    }

    /// The options as name/value pairs.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// Compiles through a persistent compile cache in `dir` (created if missing; bounded by
    /// `RPJRT_CACHE_MAX_BYTES` when set), overriding `RPJRT_CACHE_DIR`. Without it the client uses the cache that
    /// `RPJRT_CACHE_DIR` (and `RPJRT_CACHE_MAX_BYTES`) name, if any; see
    /// `rpjrt::Cache::for_client`.
    pub fn cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> ClientOptions {
        self.cache_dir = Some(dir.into());
        self
    }

    /// The compile cache directory set with [`ClientOptions::cache_dir`], if any.
    pub fn cache_dir_path(&self) -> Option<&std::path::Path> {
        self.cache_dir.as_deref()
    }
}

impl ClientOptions {
    /// Parses one `NAME=VALUE` create option as a command line gives it: the value is an
    /// integer, `true`/`false`, a float, or else text. The name is checked as
    /// [`ClientOptions::check_name`] does.
    pub fn parse_assignment(text: &str) -> crate::error::Result<(String, Value)> {
        let (name, value) = text.split_once('=').ok_or_else(|| {
            crate::error::Error::invalid(format!("option {text:?} is not NAME=VALUE"))
        })?;
        ClientOptions::check_name(name)?;
        let value = if let Ok(i) = value.parse::<i64>() {
            Value::Int64(i)
        } else if value == "true" || value == "false" {
            Value::Bool(value == "true")
        } else if let Some(f) = value.parse::<f32>().ok().filter(|f| f.is_finite()) {
            Value::Float(f)
        } else {
            Value::String(value.to_string())
        };
        Ok((name.to_string(), value))
    }

    /// Checks a create option's name before any plugin sees it: not empty, and no
    /// whitespace, control character or `=` (no plugin has such an option; an empty name
    /// reached the plugins, which disagreed on whether it is an error).
    /// `rpjrt::Client::new` checks every name this way.
    pub fn check_name(name: &str) -> crate::error::Result<()> {
        if name.is_empty() {
            return Err(crate::error::Error::invalid(
                "a create option has an empty name",
            ));
        }
        if name
            .chars()
            .any(|c| c == '=' || c.is_whitespace() || c.is_control())
        {
            return Err(crate::error::Error::invalid(format!(
                "create option name {name:?} contains '=', whitespace or a control character"
            )));
        }
        Ok(())
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for ClientOptions {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> ClientOptions {
        iter.into_iter()
            .fold(ClientOptions::new(), |o, (k, v)| o.set(k, v))
    }
}

impl From<crate::util::NamedValue> for Value {
    fn from(v: crate::util::NamedValue) -> Value {
        use crate::util::NamedValue as N;
        match v {
            N::String(s) => Value::String(s),
            N::Int64(i) => Value::Int64(i),
            N::Int64List(l) => Value::Int64List(l),
            N::Float(f) => Value::Float(f),
            N::Bool(b) => Value::Bool(b),
        }
    }
}

impl Value {
    /// `x` as PJRT's float option type (float32), or why it cannot be passed on unchanged, in
    /// words to follow "VALUE is": beyond float32 (a finite number that would become
    /// infinite), or too small for it (a nonzero number that would become 0). Subnormals that
    /// float32 holds, infinities and NaN written as such are kept. `written`, the number as
    /// text, when there is one: a nonzero mantissa (`1e-400`) is nonzero even where `x`, read
    /// as a 64-bit float, already became 0 (or infinite, for `1e400`).
    /// The one rule for create options from Python, the CLI and JSON plugin configs.
    pub fn float_option(x: f64, written: Option<&str>) -> Result<f32, &'static str> {
        let mantissa = written.map(|t| t.split(['e', 'E']).next().unwrap_or(t));
        let digits = |m: &str| m.bytes().any(|b| b.is_ascii_digit());
        let f = x as f32;
        if f.is_infinite() && (x.is_finite() || mantissa.is_some_and(digits)) {
            return Err("beyond float32 (PJRT's float option type)");
        }
        let nonzero =
            x != 0.0 || mantissa.is_some_and(|m| m.bytes().any(|b| matches!(b, b'1'..=b'9')));
        if f == 0.0 && nonzero {
            return Err(
                "too small for float32 (PJRT's float option type): it would be passed as 0",
            );
        }
        Ok(f)
    }

    /// The value as the plugin call layer passes it.
    pub fn to_raw(&self) -> crate::util::NamedValue {
        use crate::util::NamedValue as N;
        match self {
            Value::String(s) => N::String(s.clone()),
            Value::Int64(i) => N::Int64(*i),
            Value::Int64List(l) => N::Int64List(l.clone()),
            Value::Float(f) => N::Float(*f),
            Value::Bool(b) => N::Bool(*b),
        }
    }
}

/// Named values from the plugin, converted.
pub fn from_raw_list(v: Vec<(String, crate::util::NamedValue)>) -> Vec<(String, Value)> {
    v.into_iter().map(|(n, v)| (n, v.into())).collect()
}

#[cfg(test)]
mod tests {
    use super::Value;
    fn float_option(x: f64, w: Option<&str>) -> Result<f32, &'static str> {
        Value::float_option(x, w)
    }

    /// One rule for float create options: finite numbers float32 cannot hold are refused,
    /// whether given as a number or as text; what it holds (subnormals, ±0, ±inf and NaN
    /// given as such) passes unchanged.
    #[test]
    fn float_options_beyond_float32_are_refused() {
        for (x, written) in [(1e300, None), (-1e39, None), (f64::INFINITY, Some("1e400"))] {
            assert!(float_option(x, written)
                .unwrap_err()
                .starts_with("beyond float32"));
        }
        for (x, written) in [(1e-50, None), (-1e-46, None), (0.0, Some("1e-400"))] {
            assert!(float_option(x, written)
                .unwrap_err()
                .starts_with("too small"));
        }
        assert_eq!(float_option(1e-45, None), Ok(f32::from_bits(1)));
        assert_eq!(
            float_option(-0.0, None).map(f32::to_bits),
            Ok((-0.0f32).to_bits())
        );
        assert_eq!(float_option(0.0, Some("0e-400")), Ok(0.0));
        assert_eq!(float_option(f64::INFINITY, None), Ok(f32::INFINITY));
        assert_eq!(float_option(f64::INFINITY, Some("inf")), Ok(f32::INFINITY));
        assert!(float_option(f64::NAN, None).unwrap().is_nan());
        assert_eq!(float_option(3.4e38, Some("3.4e38")), Ok(3.4e38));
    }
}

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

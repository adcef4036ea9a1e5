//! Numbers and nested lists of numbers into typed host arrays: the one conversion rule.
//!
//! A [`Nested`] tree holds scalars ([`Scalar`]: bool, integer, float, complex) and lists of
//! trees, as a Python list literal or a JSON array does. [`to_host`] turns it into a dense
//! host array of one [`ElementType`] ([`HostValues`], ready for [`rpjrt::Client::put`]), or
//! refuses with an error naming the element and why.
//!
//! # The rule
//!
//! - **Shape**: the tree must be rectangular: every list at one depth has the same length
//!   and holds only lists or only scalars. A scalar alone is 0-d; an empty list is `[0]`.
//! - **Element type** when none is wanted: the kind of the scalars, which must all be of
//!   one kind: bool → `bool`, integer → `int64`, float → `float64`, complex → `complex128`
//!   (an empty list is `float64`).
//! - **Values** must be representable in the element type: integers in range (`int4` holds
//!   -8..7, `bool` only 0 and 1); no float into an integer or bool type, even `2.0`; no
//!   complex into a real type; no finite value that overflows a float type, i.e. whose
//!   magnitude reaches the largest finite value plus half an ulp of it, or passes it where
//!   that tie rounds down (`float8_e4m3fn`, whose 464 is 448; it cannot hold 1e6,
//!   `bfloat16` not 1e300), nor one that the type would turn into NaN
//!   (a negative or zero `float8_e8m0fnu`); NaN only into types with a NaN and infinities
//!   only into types with infinities. Rounding to the nearest representable value (ties
//!   to even, as numpy and ml_dtypes round; `float8_e8m0fnu` rounds ties up, as ml_dtypes
//!   does) is fine.
//! - **NaN** converts as numpy's `astype` converts it ([`convert_nan`]), bit for bit: a
//!   float is a float64 (a Python float's payload is kept), and a value read from an
//!   element of a type ([`convert`], [`values_to_host_from`]) converts from that type.
//!
//! Integers beyond `i128` are [`Scalar::BigInt`] (decimal text): out of range of every
//! integer type. Integers of any size convert to a float type (or a complex type's parts)
//! with one rounding, to the nearest value of that type ([`int_to_f64`]), never through
//! the nearest `float64` first.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use rpjrt::host::HostArray;
use rpjrt::{ElementKind, ElementType};
use rpjrt::{Error, Result};

/// One number of a [`Nested`] tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// An integer beyond `i128`, as decimal text with an optional leading `-`.
    BigInt(Box<str>),
    /// A real float.
    Float(f64),
    /// A complex number `(re, im)`.
    Complex(f64, f64),
}

/// The kind of a [`Scalar`], ordered bool < int < float < complex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScalarKind {
    /// [`Scalar::Bool`].
    Bool,
    /// [`Scalar::Int`] and [`Scalar::BigInt`].
    Int,
    /// [`Scalar::Float`].
    Float,
    /// [`Scalar::Complex`].
    Complex,
}

impl ScalarKind {
    /// The element type a tree of only this kind gets when none is wanted.
    pub const fn default_element_type(self) -> ElementType {
        match self {
            ScalarKind::Bool => ElementType::Pred,
            ScalarKind::Int => ElementType::S64,
            ScalarKind::Float => ElementType::F64,
            ScalarKind::Complex => ElementType::C128,
        }
    }

    const fn name(self) -> &'static str {
        match self {
            ScalarKind::Bool => "bool",
            ScalarKind::Int => "int",
            ScalarKind::Float => "float",
            ScalarKind::Complex => "complex",
        }
    }
}

impl Scalar {
    /// The kind of this scalar.
    pub const fn kind(&self) -> ScalarKind {
        match self {
            Scalar::Bool(_) => ScalarKind::Bool,
            Scalar::Int(_) | Scalar::BigInt(_) => ScalarKind::Int,
            Scalar::Float(_) => ScalarKind::Float,
            Scalar::Complex(..) => ScalarKind::Complex,
        }
    }

    /// The value as the `f64` that [`encode_float`] turns into the element of real float
    /// type `into` (the real part of a complex): floats as they are, integers through
    /// [`int_to_f64`] so that they round once, to the nearest element of `into`. An integer
    /// beyond `f64`'s range is refused (it must not become an infinity), for the element
    /// type `t` named in the reason.
    fn real(&self, t: ElementType, into: ElementType) -> std::result::Result<f64, String> {
        let beyond = || {
            format!(
                "overflows {t} (it is beyond the range of float64; from Python, \
                 cast=True converts as numpy's astype does)"
            )
        };
        match self {
            Scalar::Bool(b) => Ok(f64::from(u8::from(*b))),
            Scalar::Int(i) => {
                let m = i.unsigned_abs();
                int_to_f64(*i < 0, &[m as u64, (m >> 64) as u64], into).ok_or_else(beyond)
            }
            Scalar::BigInt(s) => {
                let (negative, limbs) =
                    decimal_limbs(s).ok_or_else(|| format!("is not a decimal integer ({t})"))?;
                match limbs {
                    Some(limbs) => int_to_f64(negative, &limbs, into).ok_or_else(beyond),
                    None => Err(beyond()),
                }
            }
            Scalar::Float(f) => Ok(*f),
            Scalar::Complex(re, _) => Ok(*re),
        }
    }
}

/// An integer (`negative`, magnitude in little-endian 64-bit `limbs`) as the `f64` from
/// which [`encode_float`] gives the element of real float type `into` nearest to the
/// integer (ties to even; ties up for `float8_e8m0fnu`): the one conversion of integers
/// into float types, so that they are rounded once. `None` when the magnitude is beyond
/// `f64`'s range (it would round to an infinity).
///
/// For `float64` the integer is rounded to nearest, ties to even, at 53 bits. For every
/// narrower type it is rounded to odd at 53 bits (truncated, with the lowest kept bit set
/// when any dropped bit was set): that keeps which side of every value of 51 or fewer
/// significant bits the integer lies on, and whether it is equal, so the second rounding
/// (`f64` to a type of at most 24 significant bits, its ties and its overflow limit
/// included) gives what one rounding of the integer would. Rounding to nearest first would
/// not: 2^60 + 2^36 + 1 would become the float32 tie 2^60 + 2^36, then 2^60.
pub fn int_to_f64(negative: bool, limbs: &[u64], into: ElementType) -> Option<f64> {
    let top = match limbs.iter().rposition(|&w| w != 0) {
        Some(top) => top,
        // Integers have no negative zero: `-0` is 0.0, as numpy converts it.
        None => return Some(0.0),
    };
    let bits = top * 64 + 64 - limbs[top].leading_zeros() as usize;
    let magnitude = if bits <= 53 {
        limbs[0] as f64 // exact
    } else {
        let mut shift = bits - 53;
        // The 53 bits from `shift` up, and whether any bit below `shift` is set.
        let bit = |k: usize| limbs.get(k / 64).is_some_and(|w| w >> (k % 64) & 1 == 1);
        let (word, off) = (shift / 64, shift % 64);
        let mut kept = limbs[word] >> off;
        if off > 0 {
            if let Some(next) = limbs.get(word + 1) {
                kept |= next << (64 - off);
            }
        }
        kept &= (1u64 << 53) - 1;
        let below = |k: usize| {
            // (1 << 0) - 1 masks nothing: no bit of the word is below bit 0.
            limbs[..k / 64].iter().any(|&w| w != 0) || limbs[k / 64] & ((1u64 << (k % 64)) - 1) != 0
        };
        if into == ElementType::F64 {
            // Nearest, ties to even: the first dropped bit, then the rest.
            if bit(shift - 1) && (below(shift - 1) || kept & 1 == 1) {
                kept += 1;
                if kept == 1 << 53 {
                    kept >>= 1;
                    shift += 1;
                }
            }
        } else if below(shift) {
            kept |= 1; // round to odd
        }
        // kept < 2^53 and kept · 2^shift < 2^1024 keep the product exact and finite.
        if shift + 53 > 1024 {
            return None;
        }
        kept as f64 * pow2(shift as i32)
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// The sign and magnitude (little-endian 64-bit limbs) of decimal integer text with an
/// optional leading `-` or `+`; `Some((negative, None))` for a magnitude of more than 400
/// digits, beyond every float type's range; `None` for text that is not a decimal integer.
fn decimal_limbs(text: &str) -> Option<(bool, Option<Vec<u64>>)> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.len() > 400 {
        return Some((negative, None));
    }
    let mut limbs: Vec<u64> = Vec::new();
    // Nineteen digits at a time: limbs = limbs · 10^k + chunk.
    for chunk in digits.as_bytes().chunks(19) {
        let mut carry: u128 = chunk
            .iter()
            .fold(0u128, |a, &d| a * 10 + u128::from(d - b'0'));
        let scale = 10u128.pow(chunk.len() as u32);
        for w in limbs.iter_mut() {
            let v = u128::from(*w) * scale + carry;
            *w = v as u64;
            carry = v >> 64;
        }
        if carry != 0 {
            limbs.push(carry as u64);
        }
    }
    Some((negative, Some(limbs)))
}

impl Scalar {
    /// One number written as text (a command line literal's token): `true`/`false`, an
    /// integer of any size, or a decimal float; the words `nan`, `inf` and `infinity`
    /// (any case, as Python's `float()` takes them, with an optional `+`/`-`) are the
    /// only ways to write a NaN or an infinity, so the `"NaN"`, `"inf"` and `"-inf"` that
    /// JSON output holds read back. A finite decimal whose magnitude overflows `float64`
    /// (`1e400`) is refused as out of range, as it is for every float type, rather than
    /// read as an infinity.
    pub fn parse(text: &str) -> Result<Scalar> {
        use Scalar as S;
        let (negative, word) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let infinite = word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity");
        Ok(match text {
            "true" => S::Bool(true),
            "false" => S::Bool(false),
            // Signed as Python's float() takes it: "-nan" is a NaN with its sign bit set.
            _ if word.eq_ignore_ascii_case("nan") && negative => S::Float(-f64::NAN),
            _ if word.eq_ignore_ascii_case("nan") => S::Float(f64::NAN),
            _ if infinite && negative => S::Float(f64::NEG_INFINITY),
            _ if infinite => S::Float(f64::INFINITY),
            _ => {
                let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
                if let Ok(i) = text.parse::<i128>() {
                    S::Int(i)
                } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    S::BigInt(text.trim_start_matches('+').into())
                } else {
                    // Rust's parser also takes "infinity" and "NaN" spellings; only the
                    // words above name those values, a decimal must be one.
                    let decimal = digits.bytes().all(|b| {
                        b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+')
                    });
                    let x = text
                        .parse::<f64>()
                        .ok()
                        .filter(|_| decimal)
                        .ok_or_else(|| Error::invalid(format!("{text:?} is not a number")))?;
                    if !x.is_finite() {
                        return Err(Error::invalid(format!(
                            "{text} is out of range: it is beyond the range of float64 (write \
                             inf or -inf for an infinity)"
                        )));
                    }
                    S::Float(x)
                }
            }
        })
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::BigInt(s) if s.len() > 40 => {
                // Shortened: a message should not carry thousands of digits.
                let digits = s.trim_start_matches('-').chars().count();
                let head: String = s.chars().take(20).collect();
                let tail: String = s.chars().skip(s.chars().count() - 5).collect();
                write!(f, "{head}...{tail} ({digits} digits)")
            }
            Scalar::BigInt(s) => f.write_str(s),
            Scalar::Float(x) => write!(f, "{}", Float(*x)),
            // Python's form, (1+2j) and (1-2j): `Float` ignores `{:+}`, so the sign is ours.
            Scalar::Complex(re, im) => {
                let sign = if im.is_sign_negative() && !im.is_nan() {
                    ""
                } else {
                    "+"
                };
                write!(f, "({}{sign}{}j)", Float(*re), Float(*im))
            }
        }
    }
}

/// A float shown as Python shows it (`1e+300`, `inf`, `nan`, `2.0`).
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x.is_nan() {
            f.write_str("nan")
        } else if x.is_infinite() {
            f.write_str(if x > 0.0 { "inf" } else { "-inf" })
        } else if x != 0.0 && (x.abs() >= 1e16 || x.abs() < 1e-4) {
            // Python's form: 1e+300, 1.5e-05.
            let s = format!("{x:e}");
            let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
            let exp: i32 = exp.parse().unwrap_or(0);
            let sign = if exp < 0 { '-' } else { '+' };
            write!(f, "{mant}e{sign}{:02}", exp.unsigned_abs())
        } else if x.fract() == 0.0 {
            write!(f, "{x:.1}")
        } else {
            write!(f, "{x}")
        }
    }
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar::Bool(v)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Scalar {
        Scalar::Int(v.into())
    }
}
impl From<i128> for Scalar {
    fn from(v: i128) -> Scalar {
        Scalar::Int(v)
    }
}
impl From<f64> for Scalar {
    fn from(v: f64) -> Scalar {
        Scalar::Float(v)
    }
}

/// A scalar or a list of trees (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub enum Nested {
    /// One number.
    Scalar(Scalar),
    /// A list.
    List(Vec<Nested>),
}

macro_rules! nested_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for Nested {
            fn from(v: $t) -> Nested {
                Nested::Scalar(v.into())
            }
        }
    )*};
}
nested_from_scalar!(Scalar, bool, i64, i128, f64);

impl<T: Into<Nested>> From<Vec<T>> for Nested {
    fn from(v: Vec<T>) -> Nested {
        Nested::List(v.into_iter().map(Into::into).collect())
    }
}

/// A dense row-major host array made by [`to_host`]: native byte order, one element per
/// [`ElementType::host_itemsize`] bytes (sub-byte types one per byte, numpy's form).
#[derive(Clone, Debug, PartialEq)]
pub struct HostValues {
    /// The element type.
    pub element_type: ElementType,
    /// The dims.
    pub dims: Vec<i64>,
    /// The elements.
    pub bytes: Vec<u8>,
}

impl HostValues {
    /// A [`HostArray`] owning these bytes (marked unpacked for the sub-byte types), for
    /// [`rpjrt::Client::put`].
    pub fn into_host_array(self) -> HostArray<'static> {
        let t = self.element_type;
        let a = HostArray::from_owner(Arc::new(self.bytes), t, self.dims);
        if t.is_sub_byte() {
            a.unpacked()
        } else {
            a
        }
    }
}

/// A multi-index like `[1, 0]`.
struct Path<'a>(&'a [usize]);

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{x}")?;
        }
        f.write_str("]")
    }
}

/// The deepest nesting (the highest rank) [`flatten`] accepts, numpy's limit.
pub const MAX_DEPTH: usize = 64;

/// The scalars of a rectangular tree in row-major order, and its dims; a ragged tree is an
/// error naming the first element that breaks the shape, and one nested deeper than
/// [`MAX_DEPTH`] an error too.
pub fn flatten(tree: &Nested) -> Result<(Vec<&Scalar>, Vec<i64>)> {
    // The shape is read down the first elements, then every node is checked against it.
    let mut dims: Vec<usize> = Vec::new();
    let mut node = tree;
    while let Nested::List(items) = node {
        dims.push(items.len());
        if dims.len() > MAX_DEPTH {
            return Err(Error::invalid(format!(
                "the nested list is deeper than {MAX_DEPTH} levels (rpjrt's highest rank)"
            )));
        }
        match items.first() {
            Some(first) => node = first,
            None => break,
        }
    }
    let mut leaves = Vec::new();
    let mut path = Vec::with_capacity(dims.len());
    walk(tree, &dims, &mut path, &mut leaves)?;
    Ok((leaves, dims.iter().map(|&d| d as i64).collect()))
}

fn walk<'t>(
    node: &'t Nested,
    dims: &[usize],
    path: &mut Vec<usize>,
    leaves: &mut Vec<&'t Scalar>,
) -> Result<()> {
    let depth = path.len();
    let ragged = |what: String| {
        Error::invalid(format!(
            "the nested list is ragged at depth {depth}: element {} {what}; rpjrt needs a \
             rectangular list",
            Path(path)
        ))
    };
    match (node, dims.get(depth)) {
        (Nested::Scalar(s), None) => {
            leaves.push(s);
            Ok(())
        }
        (Nested::Scalar(_), Some(&n)) => Err(ragged(format!(
            "is a number where a list of {n} was expected"
        ))),
        (Nested::List(items), Some(&n)) if items.len() == n => {
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                walk(item, dims, path, leaves)?;
                path.pop();
            }
            Ok(())
        }
        (Nested::List(items), Some(&n)) => Err(ragged(format!(
            "has {} items where the first list at this depth has {n}",
            items.len()
        ))),
        (Nested::List(items), None) => Err(ragged(format!(
            "is a list of {} where a number was expected",
            items.len()
        ))),
    }
}

/// The element type scalars get when none is wanted: the one kind's default
/// ([`ScalarKind::default_element_type`]), `float64` for none; an error when they mix
/// kinds.
pub fn default_element_type(leaves: &[&Scalar]) -> Result<ElementType> {
    let mut kinds: Vec<ScalarKind> = leaves.iter().map(|s| s.kind()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    match kinds.as_slice() {
        [] => Ok(ElementType::F64),
        [k] => Ok(k.default_element_type()),
        many => {
            let mut names: Vec<&str> = many.iter().map(|k| k.name()).collect();
            names.sort_unstable();
            Err(Error::invalid(format!(
                "the list mixes {} elements; make them one kind, or pass dtype= to say what \
                 to store",
                names.join(" and ")
            )))
        }
    }
}

/// Converts a tree of numbers into a dense host array of `want` (or of the type its
/// scalars' kind implies when `want` is `None`) under the rule of the module documentation.
/// Errors name the element (by index) and the reason, and say that Python's `cast=True`
/// converts lossily instead.
pub fn to_host(tree: &Nested, want: Option<ElementType>) -> Result<HostValues> {
    let (leaves, dims) = flatten(tree)?;
    values_to_host(&leaves, dims, want)
}

/// [`to_host`] for scalars already flattened in row-major order with their `dims` (e.g. by
/// a parser that checked the shape itself); the count must match the dims.
pub fn values_to_host<S: Borrow<Scalar>>(
    leaves: &[S],
    dims: Vec<i64>,
    want: Option<ElementType>,
) -> Result<HostValues> {
    values_to_host_from(leaves, &[], dims, want)
}

/// [`values_to_host`] for scalars of which some were read from elements of a type (numpy
/// scalars): `sources` lists those (row-major index, ascending, and the type). Their
/// values are exact in a [`Scalar`]; what the type adds is how a NaN converts: as numpy's
/// `astype` converts a NaN of that type ([`convert_nan`], which keeps payloads where numpy
/// does), where the others' NaNs convert as float64 ones. A float NaN of a source type is
/// the one [`decode_float`] reads from its bits.
pub fn values_to_host_from<S: Borrow<Scalar>>(
    leaves: &[S],
    sources: &[(usize, ElementType)],
    dims: Vec<i64>,
    want: Option<ElementType>,
) -> Result<HostValues> {
    let n = rpjrt::element_count(&dims)?;
    if n != leaves.len() {
        return Err(Error::invalid(format!(
            "{} values for dims {dims:?}, which hold {n}",
            leaves.len()
        )));
    }
    let leaves: Vec<&Scalar> = leaves.iter().map(Borrow::borrow).collect();
    let t = match want {
        Some(t) => t,
        None => default_element_type(&leaves)?,
    };
    let size = t.host_itemsize();
    if size == 0 {
        return Err(Error::invalid(format!("{t} has no host representation")));
    }
    let mut bytes = rpjrt::host::try_alloc(
        leaves.len().saturating_mul(size),
        "converting numbers to host data",
    )?;
    let at = |i: usize| index_text(&dims, i);
    // Kind checks first, over all elements (as the rule is stated).
    let worst = leaves.iter().map(|s| s.kind()).max();
    if let Some(worst) = worst {
        let i = leaves.iter().position(|s| s.kind() == worst).unwrap_or(0);
        check_kind(worst, t, || format!("{}{}", leaves[i], at(i)))?;
    }
    let mut sources = sources.iter().peekable();
    for (i, s) in leaves.iter().enumerate() {
        let src = match sources.next_if(|&&(at, _)| at == i) {
            Some(&(_, src)) => src,
            None => ElementType::F64,
        };
        put_one(s, src, t, &mut bytes)
            .map_err(|why| Error::invalid(format!("{s}{} {why}", at(i))))?;
    }
    if let Some((i, _)) = sources.next() {
        return Err(Error::invalid(format!(
            "a source type was given for value {i}, which is not one of the {} values or \
             not in ascending order",
            leaves.len()
        )));
    }
    Ok(HostValues {
        element_type: t,
        dims,
        bytes,
    })
}

/// Refuses values of kind `kind` for element type `t` where the rule refuses the whole
/// kind (complex into a real type, a float into an integer or bool type); `first` shows
/// the first such value and where it is.
fn check_kind(kind: ScalarKind, t: ElementType, first: impl FnOnce() -> String) -> Result<()> {
    let tk = t.kind();
    if kind == ScalarKind::Complex && tk != ElementKind::Complex {
        return Err(Error::invalid(format!(
            "complex values cannot be stored as {t} ({}; from Python, cast=True drops the \
             imaginary part)",
            first()
        )));
    }
    if matches!(
        tk,
        ElementKind::Bool | ElementKind::Signed | ElementKind::Unsigned
    ) && kind >= ScalarKind::Float
    {
        return Err(Error::invalid(format!(
            "float values cannot be stored as {t} without rounding ({}); convert them \
             first (from Python, cast=True does)",
            first()
        )));
    }
    Ok(())
}

/// `" at index [i, j]"` for the row-major element `i` of an array with `dims` (nothing for
/// a 0-d array).
pub fn index_text(dims: &[i64], i: usize) -> String {
    if dims.is_empty() {
        return String::new();
    }
    let mut idx = vec![0usize; dims.len()];
    let mut r = i;
    for k in (0..dims.len()).rev() {
        let d = dims[k].max(1) as usize;
        idx[k] = r % d;
        r /= d;
    }
    format!(" at index {}", Path(&idx))
}

/// A typed host array converted into element type `to` under the rule of the module
/// documentation, as if each element were the equal Python number: `data` holds the
/// elements of `from` dense, row-major and in native byte order, one element per
/// [`ElementType::host_itemsize`] bytes (sub-byte types one per byte, numpy's form).
/// Integers keep their value or are refused, floats round but never overflow, and the
/// kind checks refuse complex into a real type and floats into integer or bool types.
/// Errors name the first element that cannot be stored, by index.
pub fn convert(
    data: &[u8],
    from: ElementType,
    dims: Vec<i64>,
    to: ElementType,
) -> Result<HostValues> {
    let size = from.host_itemsize();
    let to_size = to.host_itemsize();
    if size == 0 || to_size == 0 {
        let t = if size == 0 { from } else { to };
        return Err(Error::invalid(format!("{t} has no host representation")));
    }
    let n = rpjrt::element_count(&dims)?;
    if n.checked_mul(size) != Some(data.len()) {
        return Err(Error::invalid(format!(
            "{} bytes of {from} for dims {dims:?}, which hold {n} elements of {size} bytes",
            data.len()
        )));
    }
    if let Some((i, b)) = rpjrt::first_foreign_byte(from, data) {
        return Err(Error::invalid(format!(
            "the {from} data's {}",
            rpjrt::foreign_byte_text(from, i, b)
        )));
    }
    let kind = match from.kind() {
        ElementKind::Bool => ScalarKind::Bool,
        ElementKind::Signed | ElementKind::Unsigned => ScalarKind::Int,
        ElementKind::Float => ScalarKind::Float,
        ElementKind::Complex => ScalarKind::Complex,
        _ => return Err(Error::invalid(format!("{from} values cannot be converted"))),
    };
    let at = |i: usize| index_text(&dims, i);
    let element = |i: usize| scalar_at(data, from, i);
    if n > 0 {
        check_kind(kind, to, || format!("{}{}", element(0), at(0)))?;
    }
    let mut bytes = rpjrt::host::try_alloc(n.saturating_mul(to_size), "converting host data")?;
    for i in 0..n {
        let s = element(i);
        put_one(&s, from, to, &mut bytes)
            .map_err(|why| Error::invalid(format!("{s}{} {why}", at(i))))?;
    }
    Ok(HostValues {
        element_type: to,
        dims,
        bytes,
    })
}

/// Element `i` of dense native host data of type `t` (checked by [`convert`]) as a number.
fn scalar_at(data: &[u8], t: ElementType, i: usize) -> Scalar {
    let size = t.host_itemsize();
    let bits_at = |at: usize, width: usize| -> u64 {
        let b = &data[at..at + width];
        match width {
            8 => u64::from_ne_bytes(b.try_into().unwrap_or_default()),
            4 => u64::from(u32::from_ne_bytes(b.try_into().unwrap_or_default())),
            2 => u64::from(u16::from_ne_bytes(b.try_into().unwrap_or_default())),
            _ => u64::from(b[0]),
        }
    };
    let w = t.bit_width() as u32;
    match t.kind() {
        ElementKind::Bool => Scalar::Bool(data[i] != 0),
        ElementKind::Signed => {
            let bits = bits_at(i * size, size);
            // Sign-extend from the element's own width (sub-byte elements may come either
            // way, see rpjrt::first_foreign_byte).
            let shift = 64 - w;
            Scalar::Int(i128::from(((bits << shift) as i64) >> shift))
        }
        ElementKind::Unsigned => {
            let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
            Scalar::Int(i128::from(bits_at(i * size, size) & mask))
        }
        ElementKind::Float => {
            Scalar::Float(decode_float(bits_at(i * size, size), t).unwrap_or(f64::NAN))
        }
        ElementKind::Complex => {
            let half = size / 2;
            let part = if t == ElementType::C64 {
                ElementType::F32
            } else {
                ElementType::F64
            };
            let re = decode_float(bits_at(i * size, half), part).unwrap_or(f64::NAN);
            let im = decode_float(bits_at(i * size + half, half), part).unwrap_or(f64::NAN);
            Scalar::Complex(re, im)
        }
        _ => Scalar::Bool(false),
    }
}

/// The real float type whose NaNs a float (or a complex part) read from an element of type
/// `src` carries: `src` itself, a complex type's part type, and float64 for anything else
/// (Python's numbers).
fn nan_source(src: ElementType) -> ElementType {
    match src {
        ElementType::C64 => ElementType::F32,
        t if t.kind() == ElementKind::Float => t,
        _ => ElementType::F64,
    }
}

/// Appends `s` as one element of `t` (native byte order), or says why it cannot be stored;
/// `src` is the element type `s` was read from (float64 for Python's numbers), whose NaNs
/// convert as numpy converts them ([`convert_nan`]).
fn put_one(
    s: &Scalar,
    src: ElementType,
    t: ElementType,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    match t.kind() {
        ElementKind::Bool | ElementKind::Signed | ElementKind::Unsigned => {
            let (lo, hi) = int_range(t);
            let v = match s {
                Scalar::Bool(b) => Some(i128::from(*b)),
                Scalar::Int(i) => Some(*i),
                _ => None,
            };
            let v = v.filter(|v| (lo..=hi).contains(v)).ok_or_else(|| {
                // numpy's astype wraps integers that fit in 64 bits; wider ones it refuses
                // (OverflowError), so the hint would mislead there.
                let wraps = matches!(s, Scalar::Int(i) if i64::try_from(*i).is_ok()
                    || u64::try_from(*i).is_ok());
                match wraps {
                    true => format!(
                        "does not fit in {t} (range {lo}..{hi}; from Python, cast=True wraps \
                         it as numpy's astype does)"
                    ),
                    false => format!(
                        "does not fit in {t} (range {lo}..{hi}), nor in 64 bits, so no cast \
                         can store it either"
                    ),
                }
            })?;
            // Two's complement, truncated to the width (sub-byte types in the low bits of
            // their byte, the rest zero, as ml_dtypes stores them).
            let bits = if t.is_sub_byte() {
                v as u64 & ((1 << t.bit_width()) - 1)
            } else {
                v as u64
            };
            push_bits(bits, t.host_itemsize(), out);
            Ok(())
        }
        ElementKind::Float => {
            let bits = encode_from(s.real(t, t)?, nan_source(src), t)?;
            push_bits(bits, t.host_itemsize(), out);
            Ok(())
        }
        ElementKind::Complex => {
            let part = if t == ElementType::C64 {
                ElementType::F32
            } else {
                ElementType::F64
            };
            let (re, im) = match s {
                Scalar::Complex(re, im) => (*re, *im),
                other => (other.real(t, part)?, 0.0),
            };
            for x in [re, im] {
                let bits = encode_from(x, nan_source(src), part)
                    .map_err(|why| format!("has a part that {why}"))?;
                push_bits(bits, part.host_itemsize(), out);
            }
            Ok(())
        }
        ElementKind::Token => Err("cannot be stored as a token".into()),
        _ => Err(format!("cannot be stored as {t}")),
    }
}

/// Appends the low `width` bytes of `bits` in native order.
fn push_bits(bits: u64, width: usize, out: &mut Vec<u8>) {
    match width {
        8 => out.extend_from_slice(&bits.to_ne_bytes()),
        4 => out.extend_from_slice(&(bits as u32).to_ne_bytes()),
        2 => out.extend_from_slice(&(bits as u16).to_ne_bytes()),
        _ => out.push(bits as u8),
    }
}

/// The smallest and largest value an integer or bool element type holds.
pub fn int_range(t: ElementType) -> (i128, i128) {
    let bits = t.bit_width() as u32;
    match t.kind() {
        ElementKind::Bool => (0, 1),
        ElementKind::Signed => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        ElementKind::Unsigned => (0, (1i128 << bits) - 1),
        _ => (0, -1),
    }
}

/// How a float format spends its top codes on infinities and NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Specials {
    /// IEEE 754: the all-ones exponent holds ±inf and NaNs.
    Ieee,
    /// Finite, NaN = all ones after the sign (`float8_e4m3fn`).
    Fn,
    /// Finite, one NaN at the negative-zero code, no negative zero (`*fnuz`).
    Fnuz,
    /// Finite, no NaN (`float4_e2m1fn`, the float6 types).
    FiniteOnly,
    /// Exponent only, no sign or zero, NaN = all ones (`float8_e8m0fnu`).
    E8m0,
}

/// A float format: exponent bits, mantissa bits, bias, specials.
#[derive(Clone, Copy, Debug)]
struct Format {
    exp: u32,
    man: u32,
    bias: i32,
    specials: Specials,
}

fn format_of(t: ElementType) -> Option<Format> {
    use ElementType as T;
    use Specials::*;
    let f = |exp, man, bias, specials| {
        Some(Format {
            exp,
            man,
            bias,
            specials,
        })
    };
    match t {
        T::F16 => f(5, 10, 15, Ieee),
        T::F32 => f(8, 23, 127, Ieee),
        T::F64 => f(11, 52, 1023, Ieee),
        T::BF16 => f(8, 7, 127, Ieee),
        T::F8E5M2 => f(5, 2, 15, Ieee),
        T::F8E4M3 => f(4, 3, 7, Ieee),
        T::F8E3M4 => f(3, 4, 3, Ieee),
        T::F8E4M3FN => f(4, 3, 7, Fn),
        T::F8E4M3FNUZ => f(4, 3, 8, Fnuz),
        T::F8E5M2FNUZ => f(5, 2, 16, Fnuz),
        T::F8E4M3B11FNUZ => f(4, 3, 11, Fnuz),
        T::F8E8M0FNU => f(8, 0, 127, E8m0),
        T::F4E2M1FN => f(2, 1, 1, FiniteOnly),
        T::F6E2M3FN => f(2, 3, 1, FiniteOnly),
        T::F6E3M2FN => f(3, 2, 3, FiniteOnly),
        _ => None,
    }
}

impl Format {
    fn sign_bit(&self) -> u64 {
        if self.specials == Specials::E8m0 {
            0
        } else {
            1 << (self.exp + self.man)
        }
    }

    /// The biased exponent field and mantissa field of the largest finite value.
    fn max_fields(&self) -> (i32, u64) {
        let all_exp = (1i32 << self.exp) - 1;
        let all_man = (1u64 << self.man) - 1;
        match self.specials {
            Specials::Ieee => (all_exp - 1, all_man),
            Specials::Fn => (all_exp, all_man - 1),
            Specials::Fnuz | Specials::FiniteOnly => (all_exp, all_man),
            Specials::E8m0 => (all_exp - 1, 0),
        }
    }

    /// The largest finite value.
    fn max(&self) -> f64 {
        let (e, m) = self.max_fields();
        (1.0 + m as f64 / (1u64 << self.man) as f64) * pow2(e - self.bias)
    }

    /// The smallest magnitude that overflows: the largest finite value plus half an ulp.
    fn limit(&self) -> f64 {
        let (e, _) = self.max_fields();
        self.max() + pow2(e - self.bias - self.man as i32 - 1)
    }

    fn nan(&self, negative: bool) -> Option<u64> {
        let sign = if negative { self.sign_bit() } else { 0 };
        let all_exp = (1u64 << self.exp) - 1;
        match self.specials {
            Specials::Ieee => Some(sign | (all_exp << self.man) | (1 << (self.man - 1))),
            Specials::Fn => Some(sign | (all_exp << self.man) | ((1 << self.man) - 1)),
            Specials::Fnuz => Some(1 << (self.exp + self.man)),
            Specials::E8m0 => Some(0xFF),
            Specials::FiniteOnly => None,
        }
    }
}

/// 2^e as an f64 for e in f64's normal range (and 0 below it).
fn pow2(e: i32) -> f64 {
    if e < -1074 {
        0.0
    } else if e < -1022 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        f64::from_bits(((e + 1023) as u64) << 52)
    }
}

/// The bits of the element of float type `t` nearest to `x` (ties to even;
/// `float8_e8m0fnu` ties up, as ml_dtypes does), in the low bits of the result, or why `x`
/// cannot be stored: a finite value that overflows or would become NaN, a NaN or infinity
/// for a type without one. A NaN converts as numpy converts a float64 NaN
/// ([`convert_nan`]): into float64 unchanged, payload and all.
pub fn encode_float(x: f64, t: ElementType) -> std::result::Result<u64, String> {
    let f = format_of(t).ok_or_else(|| format!("{t} is not a real float type"))?;
    let negative = x.is_sign_negative();
    let sign = if negative { f.sign_bit() } else { 0 };
    if x.is_nan() {
        // A float64 NaN as numpy's astype converts it (its payload where `t` keeps one).
        return convert_nan(x.to_bits(), ElementType::F64, t);
    }
    if x.is_infinite() {
        return if f.specials == Specials::Ieee {
            Ok(sign | (((1u64 << f.exp) - 1) << f.man))
        } else {
            Err(format!("cannot be stored as {t}, which has no infinity"))
        };
    }
    let a = x.abs();
    if t == ElementType::F64 {
        return Ok(x.to_bits());
    }
    // Halfway past the largest finite value overflows when ties go away from it: to an odd
    // largest mantissa (ties to even) or up (`float8_e8m0fnu`). `float8_e4m3fn`'s largest,
    // 448, has an even mantissa, so 464 rounds down to it, as ml_dtypes rounds.
    let tie_stays = f.specials != Specials::E8m0 && f.max_fields().1 & 1 == 0;
    if a > f.limit() || (a == f.limit() && !tie_stays) {
        return Err(format!(
            "overflows {t} (largest finite value {}; from Python, cast=True \
             converts as numpy's astype does)",
            Float(f.max())
        ));
    }
    if f.specials == Specials::E8m0 {
        if negative || a == 0.0 {
            return Err(format!(
                "cannot be stored as {t}, which holds only positive powers of two (it would \
                 become NaN; from Python, cast=True converts as numpy's astype does)"
            ));
        }
        // ml_dtypes rounds to the nearer power of two with ties up; below the smallest
        // value (2^-127) it gives the smallest.
        let bits = a.to_bits();
        let (mut e, upper_half) = if bits >> 52 == 0 {
            // An f64 subnormal: far below 2^-127.
            (-1075, false)
        } else {
            (
                ((bits >> 52) as i32) - 1023,
                bits & (1 << 51) != 0, // mantissa >= 0.5: at or past the midpoint 1.5·2^e
            )
        };
        if upper_half {
            e += 1;
        }
        return Ok((e + f.bias).max(0) as u64);
    }
    if t == ElementType::F32 {
        // Rust's conversion rounds to nearest, ties to even; below the limit it is finite.
        return Ok(u64::from((x as f32).to_bits()));
    }
    if t == ElementType::F16 {
        return Ok(u64::from(half::f16::from_f64(sticky_low_word(x)).to_bits()));
    }
    if t == ElementType::BF16 {
        return Ok(u64::from(
            half::bf16::from_f64(sticky_low_word(x)).to_bits(),
        ));
    }
    if a == 0.0 {
        return Ok(if f.specials == Specials::Fnuz {
            0
        } else {
            sign
        });
    }
    // a = m · 2^e exactly, m a 53-bit integer (or fewer for an f64 subnormal).
    let bits = a.to_bits();
    let (m, e) = if bits >> 52 == 0 {
        (bits, -1074)
    } else {
        (
            (bits & ((1 << 52) - 1)) | (1 << 52),
            ((bits >> 52) as i32) - 1075,
        )
    };
    let top = e + 63 - m.leading_zeros() as i32; // floor(log2 a)
    let emin = 1 - f.bias;
    // The spacing of representable values around a: 2^q.
    let q = top.max(emin) - f.man as i32;
    let shift = q - e;
    let n: u64 = if shift <= 0 {
        m << (-shift) // exact; a < limit keeps this far inside u64
    } else if shift > 54 {
        0
    } else {
        let kept = m >> shift;
        let rest = m & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rest > half || (rest == half && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    if n == 0 {
        return Ok(if f.specials == Specials::Fnuz {
            0
        } else {
            sign
        });
    }
    // n · 2^q with n < 2^(man+1), or exactly 2^(man+1) after rounding up.
    let (n, q) = if n >> (f.man + 1) != 0 {
        (n >> 1, q + 1)
    } else {
        (n, q)
    };
    let implicit = 1u64 << f.man;
    let fields = if n < implicit {
        n // subnormal: exponent field 0
    } else {
        let biased = (q + f.man as i32 + f.bias) as u64;
        (biased << f.man) | (n - implicit)
    };
    Ok(sign | fields)
}

/// The value of the element of float type `t` whose bits are the low bits of `bits` (the
/// inverse of [`encode_float`]): NaN and the infinities where the type has them, `-0.0`
/// for a negative zero. A NaN of an IEEE type (float16/32/64, bfloat16, the float8 types
/// with infinities) keeps its sign and its payload, shifted to the top of float64's (the
/// quiet bit as it was, so a signalling NaN stays one). `None` when `t` is not a real
/// float type.
pub fn decode_float(bits: u64, t: ElementType) -> Option<f64> {
    let f = format_of(t)?;
    if f.specials == Specials::Ieee {
        // A NaN widens keeping its sign and every payload bit (the quiet bit included, as
        // it is), so that [`nan_source_bits`] gives its bits back exactly.
        let man = f.man;
        let width = f.exp + man + 1;
        let bits = bits & (u64::MAX >> (64 - width));
        let all_exp = ((1u64 << f.exp) - 1) << man;
        if bits & all_exp == all_exp && bits & ((1 << man) - 1) != 0 {
            let sign = (bits >> (width - 1)) << 63;
            let payload = (bits & ((1 << man) - 1)) << (52 - man);
            return Some(f64::from_bits(sign | (0x7ff << 52) | payload));
        }
    }
    match t {
        ElementType::F64 => return Some(f64::from_bits(bits)),
        ElementType::F32 => return Some(f64::from(f32::from_bits(bits as u32))),
        ElementType::F16 => return Some(half::f16::from_bits(bits as u16).to_f64()),
        ElementType::BF16 => return Some(half::bf16::from_bits(bits as u16).to_f64()),
        _ => {}
    }
    let width = f.exp + f.man + u32::from(f.specials != Specials::E8m0);
    let bits = bits & ((1u64 << width) - 1);
    let negative = bits & f.sign_bit() != 0;
    // A NaN keeps its sign bit, as numpy's (ml_dtypes') conversions keep it.
    let nan = if negative { -f64::NAN } else { f64::NAN };
    if f.nan(false)
        .is_some_and(|n| n == bits || f.nan(true) == Some(bits))
    {
        return Some(nan);
    }
    let all_exp = (1u64 << f.exp) - 1;
    let e = (bits >> f.man) & all_exp;
    let m = bits & ((1u64 << f.man) - 1);
    let magnitude = if f.specials == Specials::Ieee && e == all_exp {
        if m != 0 {
            return Some(nan);
        }
        f64::INFINITY
    } else if e == 0 && f.specials != Specials::E8m0 {
        // Subnormal (or zero): no implicit leading one, the smallest exponent.
        m as f64 / (1u64 << f.man) as f64 * pow2(1 - f.bias)
    } else {
        (1.0 + m as f64 / (1u64 << f.man) as f64) * pow2(e as i32 - f.bias)
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// The mantissa width of the types whose NaNs carry a payload through numpy's
/// conversions: numpy's float16, float32 and float64, and bfloat16 (as a source).
fn payload_bits(t: ElementType) -> Option<u32> {
    match t {
        ElementType::F16 => Some(10),
        ElementType::BF16 => Some(7),
        ElementType::F32 => Some(23),
        ElementType::F64 => Some(52),
        _ => None,
    }
}

/// The bits of the NaN of real float type `from` that [`decode_float`] read as `x` (a
/// NaN): exact for the IEEE types, which have payloads; for the others (one NaN, or one
/// of each sign) the type's NaN of `x`'s sign.
fn nan_source_bits(x: f64, from: ElementType) -> u64 {
    let bits = x.to_bits();
    match format_of(from) {
        Some(f) if f.specials == Specials::Ieee => {
            let man = f.man;
            let sign = (bits >> 63) << (f.exp + man);
            sign | (((1u64 << f.exp) - 1) << man) | ((bits & ((1 << 52) - 1)) >> (52 - man))
        }
        Some(f) => f.nan(x.is_sign_negative()).unwrap_or(0),
        None => bits,
    }
}

/// The element of real float type `to` that numpy's `astype` (ml_dtypes' for its types)
/// makes of the NaN whose bits are `bits` in real float type `from`, or why `to` cannot
/// hold it (it has no NaN):
///
/// - the same type: the same bits;
/// - among float16, float32 and float64 (and from bfloat16 into float32 or float64): the
///   sign and the top bits of the payload. The conversions between float32 and float64
///   (the processor's, which numpy uses; ml_dtypes' bfloat16 goes through float32) set the
///   quiet bit, numpy's own float16 conversions do not, and keep the lowest bit set when
///   every kept payload bit is clear, so that a NaN stays a NaN;
/// - into bfloat16 and the 8-bit floats, and out of the 8-bit floats (and from bfloat16
///   into float16): the type's own NaN, with the sign where it has one.
pub fn convert_nan(
    bits: u64,
    from: ElementType,
    to: ElementType,
) -> std::result::Result<u64, String> {
    use ElementType as T;
    let f = format_of(to).ok_or_else(|| format!("{to} is not a real float type"))?;
    let g = format_of(from).ok_or_else(|| format!("{from} is not a real float type"))?;
    let negative = bits & g.sign_bit() != 0;
    let Some(nan) = f.nan(negative) else {
        return Err(format!("cannot be stored as {to}, which has no NaN"));
    };
    if from == to {
        let width = g.exp + g.man + u32::from(g.specials != Specials::E8m0);
        return Ok(bits & (u64::MAX >> (64 - width)));
    }
    let (Some(mf), Some(mt)) = (payload_bits(from), payload_bits(to)) else {
        return Ok(nan);
    };
    if to == T::BF16 || (from == T::BF16 && to == T::F16) {
        return Ok(nan);
    }
    let payload = bits & ((1 << mf) - 1);
    let mut p = if mt >= mf {
        payload << (mt - mf)
    } else {
        payload >> (mf - mt)
    };
    if matches!((from, to), (T::F32 | T::BF16, T::F64) | (T::F64, T::F32)) {
        p |= 1 << (mt - 1);
    } else if p == 0 {
        p = 1;
    }
    let sign = if negative { f.sign_bit() } else { 0 };
    Ok(sign | (((1u64 << f.exp) - 1) << mt) | p)
}

/// [`encode_float`] for `x` read from an element of real float type `from`: a NaN converts
/// from that type's NaN, as numpy converts it ([`convert_nan`]).
fn encode_from(x: f64, from: ElementType, t: ElementType) -> std::result::Result<u64, String> {
    if x.is_nan() && from != ElementType::F64 {
        return convert_nan(nan_source_bits(x, from), from, t);
    }
    encode_float(x, t)
}

/// `x` with its low 32 mantissa bits folded into bit 32 (set when any of them is set).
///
/// `half`'s `from_f64` reads only the top 32 bits of an `f64`: a value just past a tie in
/// the dropped bits (1 + 2^-11 + 2^-40 for float16) would round as the tie, to even. Folding
/// the dropped bits into a sticky bit (round to odd at 20 mantissa bits, far more than the
/// 10 of float16 or 7 of bfloat16 plus a rounding bit) makes its rounding exact again.
fn sticky_low_word(x: f64) -> f64 {
    let bits = x.to_bits();
    if bits & 0xffff_ffff == 0 {
        x
    } else {
        f64::from_bits((bits & !0xffff_ffff) | (1 << 32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElementType as T;

    #[test]
    fn complex_values_show_their_sign_as_python_does() {
        let show = |re, im| Scalar::Complex(re, im).to_string();
        assert_eq!(show(1.0, 2.0), "(1.0+2.0j)");
        assert_eq!(show(1.0, -2.0), "(1.0-2.0j)");
        assert_eq!(show(0.0, 1e300), "(0.0+1e+300j)");
        assert_eq!(show(f64::NAN, 1.0), "(nan+1.0j)");
        assert_eq!(show(1.0, f64::NAN), "(1.0+nanj)");
        assert_eq!(show(1.0, f64::NEG_INFINITY), "(1.0-infj)");
    }

    fn host(tree: impl Into<Nested>, want: Option<ElementType>) -> Result<HostValues> {
        to_host(&tree.into(), want)
    }

    fn err(tree: impl Into<Nested>, want: Option<ElementType>) -> String {
        host(tree, want).unwrap_err().to_string()
    }

    fn l(items: Vec<Nested>) -> Nested {
        Nested::List(items)
    }

    #[test]
    fn shapes_and_default_types() {
        let v = host(vec![vec![1i64, 2, 3], vec![4, 5, 6]], None).unwrap();
        assert_eq!((v.element_type, v.dims.clone()), (T::S64, vec![2, 3]));
        let want: Vec<u8> = [1i64, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(v.bytes, want);
        let v = host(2.5f64, None).unwrap();
        assert_eq!((v.element_type, v.dims), (T::F64, vec![]));
        assert_eq!(host(true, None).unwrap().element_type, T::Pred);
        let c = host(Nested::Scalar(Scalar::Complex(1.0, 2.0)), None).unwrap();
        assert_eq!(c.element_type, T::C128);
        assert_eq!(c.bytes.len(), 16);
        let e = host(l(vec![]), None).unwrap();
        assert_eq!((e.element_type, e.dims), (T::F64, vec![0]));
        let e = host(l(vec![l(vec![]), l(vec![])]), None).unwrap();
        assert_eq!(e.dims, vec![2, 0]);
        let e = host(l(vec![l(vec![l(vec![])])]), Some(T::S4)).unwrap();
        assert_eq!((e.dims, e.bytes.len()), (vec![1, 1, 0], 0));
    }

    #[test]
    fn ragged_lists_name_the_element() {
        let e = err(l(vec![vec![1i64].into(), vec![2i64, 3].into()]), None);
        assert!(
            e.contains("ragged at depth 1") && e.contains("element [1]"),
            "{e}"
        );
        let e = err(l(vec![vec![1i64].into(), 2i64.into()]), None);
        assert!(e.contains("ragged") && e.contains("[1] is a number"), "{e}");
        let e = err(l(vec![2i64.into(), vec![1i64].into()]), None);
        assert!(e.contains("ragged") && e.contains("[1] is a list"), "{e}");
        let e = err(l(vec![l(vec![]), vec![1i64].into()]), None);
        assert!(e.contains("ragged"), "{e}");
        let deep = l(vec![
            vec![vec![1i64, 2], vec![3, 4]].into(),
            vec![vec![1i64, 2], vec![3]].into(),
        ]);
        let e = err(deep, None);
        assert!(e.contains("depth 2") && e.contains("[1, 1]"), "{e}");
    }

    #[test]
    fn too_deep_is_refused() {
        let mut t = Nested::from(1i64);
        for _ in 0..MAX_DEPTH {
            t = Nested::List(vec![t]);
        }
        assert_eq!(flatten(&t).unwrap().1.len(), MAX_DEPTH);
        let t = Nested::List(vec![t]);
        assert!(err(t, None).contains("deeper than 64"));
    }

    #[test]
    fn mixed_kinds_need_a_type() {
        let e = err(l(vec![1i64.into(), 2.0f64.into()]), None);
        assert!(e.contains("mixes float and int"), "{e}");
        let e = err(l(vec![true.into(), 1i64.into()]), None);
        assert!(e.contains("mixes bool and int"), "{e}");
        let v = host(
            l(vec![1.5f64.into(), 2i64.into(), true.into()]),
            Some(T::F16),
        )
        .unwrap();
        assert_eq!(
            v.bytes,
            [0x3E00u16, 0x4000, 0x3C00].map(u16::to_ne_bytes).concat()
        );
    }

    #[test]
    fn integers_in_range_only() {
        for (t, lo, hi) in [
            (T::S1, -1, 0),
            (T::U1, 0, 1),
            (T::S2, -2, 1),
            (T::U2, 0, 3),
            (T::S4, -8, 7),
            (T::U4, 0, 15),
            (T::S8, -128, 127),
            (T::U8, 0, 255),
            (T::S16, -32768, 32767),
            (T::U16, 0, 65535),
            (T::S32, i32::MIN as i128, i32::MAX as i128),
            (T::U32, 0, u32::MAX as i128),
            (T::S64, i64::MIN as i128, i64::MAX as i128),
            (T::U64, 0, u64::MAX as i128),
            (T::Pred, 0, 1),
        ] {
            assert_eq!(int_range(t), (lo, hi), "{t}");
            let v = host(vec![Scalar::Int(lo), Scalar::Int(hi)], Some(t)).unwrap();
            let w = t.host_itemsize();
            assert_eq!(v.bytes.len(), 2 * w);
            if !t.is_sub_byte() {
                assert_eq!(v.bytes[..w], lo.to_ne_bytes()[..w], "{t}");
                assert_eq!(v.bytes[w..], hi.to_ne_bytes()[..w], "{t}");
            }
            for bad in [lo - 1, hi + 1] {
                let e = err(vec![Scalar::Int(0), Scalar::Int(bad)], Some(t));
                // A cast wraps what fits in 64 bits (numpy's astype); nothing stores the rest.
                let hint = match i64::try_from(bad).is_ok() || u64::try_from(bad).is_ok() {
                    true => "cast=True",
                    false => "no cast can store it",
                };
                assert!(
                    e.contains(&format!("{bad} at index [1] does not fit in {t}"))
                        && e.contains(hint),
                    "{t}: {e}"
                );
            }
        }
        // One per byte in the low bits, as ml_dtypes stores int4.
        assert_eq!(
            host(vec![-2i64, 7], Some(T::S4)).unwrap().bytes,
            vec![0x0E, 0x07]
        );
        assert_eq!(host(vec![-1i64], Some(T::S1)).unwrap().bytes, vec![0x01]);
        // bool: 0/1 and True/False only.
        let v = host(
            l(vec![true.into(), 0i64.into(), 1i64.into()]),
            Some(T::Pred),
        )
        .unwrap();
        assert_eq!(v.bytes, vec![1, 0, 1]);
        assert!(err(vec![2i64], Some(T::Pred)).contains("does not fit in bool"));
        // True does not fit in int1 (-1..0).
        assert!(err(vec![true], Some(T::S1)).contains("does not fit in int1"));
        let big = Nested::Scalar(Scalar::BigInt("1180591620717411303424".into()));
        let e = err(big.clone(), None);
        assert!(
            e.contains("1180591620717411303424 does not fit in int64"),
            "{e}"
        );
        assert!(err(Nested::Scalar(Scalar::Int(1 << 70)), None).contains("does not fit"));
        let v = host(big, Some(T::F64)).unwrap();
        assert_eq!(v.bytes, (2f64.powi(70)).to_ne_bytes());
    }

    #[test]
    fn floats_and_complex_are_not_squeezed_into_other_kinds() {
        let e = err(vec![1.5f64], Some(T::S32));
        assert!(
            e.contains("without rounding") && e.contains("cast=True"),
            "{e}"
        );
        assert!(err(vec![2.0f64], Some(T::S8)).contains("without rounding"));
        assert!(err(vec![1.0f64], Some(T::Pred)).contains("without rounding"));
        let c = Nested::from(vec![Nested::Scalar(Scalar::Complex(0.0, 1.0))]);
        let e = to_host(&c, Some(T::F32)).unwrap_err().to_string();
        assert!(
            e.contains("complex values cannot be stored as float32"),
            "{e}"
        );
        assert!(to_host(&c, Some(T::S8))
            .unwrap_err()
            .to_string()
            .contains("complex"));
        let v = to_host(&c, Some(T::C64)).unwrap();
        assert_eq!(v.bytes, [0f32, 1.0].map(f32::to_ne_bytes).concat());
        let v = host(vec![3i64], Some(T::C128)).unwrap();
        assert_eq!(v.bytes, [3f64, 0.0].map(f64::to_ne_bytes).concat());
        let e = host(vec![1e300f64], Some(T::C64)).unwrap_err().to_string();
        assert!(e.contains("overflows float32"), "{e}");
    }

    /// Largest finite value and overflow limit of every float type, as ml_dtypes' finfo
    /// gives them (max, and max + eps·2^(maxexp-1)/2).
    #[test]
    fn float_limits_match_ml_dtypes() {
        for (t, max, limit) in [
            (T::F16, 65504.0, 65520.0),
            (T::BF16, 3.3895313892515355e38, 3.39617752923046e38),
            (T::F32, f32::MAX as f64, 3.4028235677973366e38),
            (T::F8E5M2, 57344.0, 61440.0),
            (T::F8E4M3FN, 448.0, 464.0),
            (T::F8E4M3FNUZ, 240.0, 248.0),
            (T::F8E5M2FNUZ, 57344.0, 61440.0),
            (T::F8E4M3B11FNUZ, 30.0, 31.0),
            (T::F8E4M3, 240.0, 248.0),
            (T::F8E3M4, 15.5, 15.75),
            (T::F8E8M0FNU, 2f64.powi(127), 1.5 * 2f64.powi(127)),
            (T::F4E2M1FN, 6.0, 7.0),
            (T::F6E2M3FN, 7.5, 7.75),
            (T::F6E3M2FN, 28.0, 30.0),
        ] {
            let f = format_of(t).unwrap();
            assert_eq!((f.max(), f.limit()), (max, limit), "{t}");
            // The largest value is stored, the limit and beyond are refused.
            assert!(encode_float(max, t).is_ok(), "{t}");
            assert!(encode_float(-max, t).is_ok() || t == T::F8E8M0FNU, "{t}");
            let just_below = f64::from_bits(limit.to_bits() - 1);
            assert!(encode_float(just_below, t).is_ok(), "{t}");
            if t == T::F8E4M3FN {
                // The tie rounds to the even mantissa, 448 (ml_dtypes gives 448 too); past
                // it is an overflow.
                assert_eq!(encode_float(limit, t), encode_float(max, t), "{t}");
                assert_eq!(encode_float(-limit, t), encode_float(-max, t), "{t}");
                let just_above = f64::from_bits(limit.to_bits() + 1);
                assert!(encode_float(just_above, t).is_err(), "{t}");
                continue;
            }
            let e = encode_float(limit, t).unwrap_err();
            assert!(
                e.contains(&format!("overflows {t}")) && e.contains("cast=True"),
                "{t}: {e}"
            );
            assert!(encode_float(-1e300, t).is_err(), "{t}");
        }
    }

    #[test]
    fn float_bits_match_known_encodings() {
        let b = |x: f64, t| encode_float(x, t).unwrap();
        // f32 agrees with Rust's own rounding, subnormals included.
        for x in [
            1.0,
            -2.5,
            0.1,
            1e-40,
            -1e-45,
            3.4028234e38,
            1.0 + f64::EPSILON,
            7e-46,
        ] {
            assert_eq!(b(x, T::F32), u64::from((x as f32).to_bits()), "{x}");
        }
        assert_eq!(b(1.5, T::F16), 0x3E00);
        assert_eq!(b(-1.0, T::F16), 0xBC00);
        assert_eq!(b(5.960464477539063e-8, T::F16), 1); // smallest subnormal
        assert_eq!(b(65519.0, T::F16), 0x7BFF);
        assert_eq!(b(1.0 + 2f64.powi(-11), T::F16), 0x3C00); // tie to even
        assert_eq!(b(1.0 + 3.0 * 2f64.powi(-11), T::F16), 0x3C02);
        // Just past a tie only in the low 32 bits of the f64: rounds up, not to even.
        assert_eq!(b(1.0 + 2f64.powi(-11) + 2f64.powi(-40), T::F16), 0x3C01);
        assert_eq!(b(-(1.0 + 2f64.powi(-11) + 2f64.powi(-40)), T::F16), 0xBC01);
        assert_eq!(b(2f64.powi(-25) + 2f64.powi(-60), T::F16), 1); // past half the subnormal
                                                                   // Direct rounding from f64 (no double rounding through f32), as ml_dtypes does.
        assert_eq!(b(1.0 + 2f64.powi(-8) + 2f64.powi(-40), T::BF16), 0x3F81);
        assert_eq!(b(1.5, T::BF16), 16320);
        assert_eq!(b(448.0, T::F8E4M3FN), 0x7E);
        assert_eq!(b(-1.0, T::F8E4M3FN), 184);
        assert_eq!(b(0.001953125, T::F8E4M3FN), 1);
        assert_eq!(b(1.5, T::F8E4M3FNUZ), 68);
        assert_eq!(b(-1.0, T::F8E4M3FNUZ), 192);
        assert_eq!(b(-0.0, T::F8E4M3FNUZ), 0);
        assert_eq!(b(-1e-300, T::F8E5M2FNUZ), 0);
        assert_eq!(b(-0.0, T::F8E5M2), 128);
        assert_eq!(b(3.0, T::F8E5M2), 66);
        assert_eq!(b(1.5, T::F8E4M3B11FNUZ), 92);
        assert_eq!(b(3.0, T::F8E4M3), 68);
        assert_eq!(b(-1.0, T::F8E3M4), 176);
        assert_eq!(b(1.5, T::F4E2M1FN), 3);
        assert_eq!(b(-6.0, T::F4E2M1FN), 15);
        assert_eq!(b(2.5, T::F4E2M1FN), 4); // tie to even: 2.0
        assert_eq!(b(-1.0, T::F6E2M3FN), 40);
        assert_eq!(b(3.0, T::F6E3M2FN), 18);
        // float8_e8m0fnu: powers of two, ties up, tiny values to the smallest.
        assert_eq!(b(1.0, T::F8E8M0FNU), 127);
        assert_eq!(b(1.49, T::F8E8M0FNU), 127);
        assert_eq!(b(1.5, T::F8E8M0FNU), 128);
        assert_eq!(b(3.0, T::F8E8M0FNU), 129);
        assert_eq!(b(0.7, T::F8E8M0FNU), 126);
        assert_eq!(b(1e-300, T::F8E8M0FNU), 0);
        assert!(encode_float(-1.0, T::F8E8M0FNU)
            .unwrap_err()
            .contains("NaN"));
        assert!(encode_float(0.0, T::F8E8M0FNU).is_err());
    }

    proptest::proptest! {
        /// float16 and bfloat16 (encoded by `half`): the nearest value, ties to even, for
        /// any finite f64 below the overflow limit.
        #[test]
        fn half_precision_rounds_to_nearest(bits in proptest::prelude::any::<u64>()) {
            let x = f64::from_bits(bits);
            for t in [T::F16, T::BF16] {
                let f = format_of(t).unwrap();
                if !x.is_finite() || x.abs() >= f.limit() {
                    continue;
                }
                let got = encode_float(x, t).unwrap();
                let value = |b: u64| match t {
                    T::F16 => half::f16::from_bits(b as u16).to_f64(),
                    _ => half::bf16::from_bits(b as u16).to_f64(),
                };
                let err = (value(got) - x).abs();
                let mag = got & 0x7fff;
                // Neighbours in magnitude: one code below and above (same sign).
                for n in [mag.wrapping_sub(1), mag + 1] {
                    let nb = (got & 0x8000) | n;
                    if n > 0x7fff || value(nb).is_nan() || value(nb).is_infinite() {
                        continue;
                    }
                    let other = (value(nb) - x).abs();
                    proptest::prop_assert!(
                        err < other || (err == other && got & 1 == 0),
                        "{x:e} as {t}: {got:#x} (err {err:e}) vs {nb:#x} (err {other:e})"
                    );
                }
            }
        }
    }

    /// The element of `t` (a real float type, or a complex type's first part) that
    /// `to_host` stores for the integer `s`, as its bits.
    fn stored(s: Scalar, t: ElementType) -> std::result::Result<u64, String> {
        let v = values_to_host(&[s], vec![], Some(t)).map_err(|e| e.to_string())?;
        let width = match t {
            T::C64 => 4,
            T::C128 => 8,
            _ => t.host_itemsize(),
        };
        let mut raw = [0u8; 8];
        raw[..width].copy_from_slice(&v.bytes[..width]);
        Ok(u64::from_le_bytes(raw))
    }

    /// Whether `got` (bits of `t`) is the nearest value of `t` to the integer `n`, ties
    /// to even, where every candidate value is an integer (|n| at least 2^(man + 1)).
    fn nearest_for_integer(n: i128, t: ElementType, got: u64) -> bool {
        let f = format_of(t).unwrap();
        let value = |b: u64| decode_float(b, t).unwrap();
        let exact =
            |x: f64| -> Option<i128> { (x.is_finite() && x.abs() < 1.6e38).then_some(x as i128) };
        let Some(v) = exact(value(got)) else {
            return false;
        };
        let err = (v - n).unsigned_abs();
        let sign = got & f.sign_bit();
        let mag = got & (f.sign_bit() - 1);
        [mag.wrapping_sub(1), mag + 1]
            .into_iter()
            .filter(|&m| m < f.sign_bit())
            .filter_map(|m| exact(value(sign | m)))
            .all(|o| {
                let other = (o - n).unsigned_abs();
                err < other || (err == other && got & 1 == 0)
            })
    }

    #[test]
    fn integers_round_once_to_the_nearest_float() {
        // The report's cases: one past a tie of the target that float64 rounds onto the tie.
        let f32_of = |n: i128| stored(Scalar::Int(n), T::F32).map(|b| f32::from_bits(b as u32));
        assert_eq!(
            f32_of((1 << 60) + (1 << 36) + 1),
            Ok(((1u64 << 60) + (1 << 37)) as f32)
        );
        assert_eq!(
            f32_of(-((1 << 60) + (1 << 36) + 1)),
            Ok(-(((1u64 << 60) + (1 << 37)) as f32))
        );
        assert_eq!(f32_of((1 << 60) + (1 << 36)), Ok((1u64 << 60) as f32)); // the tie: even
        let c64 = stored(Scalar::Int((1 << 60) + (1 << 36) + 1), T::C64).unwrap();
        assert_eq!(
            f32::from_bits(c64 as u32),
            ((1u64 << 60) + (1 << 37)) as f32
        );
        let bf = stored(Scalar::Int((1 << 60) + (1 << 52) + 1), T::BF16).unwrap();
        assert_eq!(
            half::bf16::from_bits(bf as u16).to_f64(),
            ((1u64 << 60) + (1 << 53)) as f64
        );
        // float64 itself: nearest, ties to even, for integers past 2^53.
        let f64_of = |n: i128| stored(Scalar::Int(n), T::F64).map(f64::from_bits);
        assert_eq!(f64_of((1 << 53) + 1), Ok((1u64 << 53) as f64));
        assert_eq!(f64_of((1 << 53) + 3), Ok(((1u64 << 53) + 4) as f64));
        assert_eq!(f64_of(u64::MAX.into()), Ok(18446744073709551616.0));
        assert_eq!(f64_of(i128::MAX), Ok(2f64.powi(127)));
        assert_eq!(f64_of(i128::MIN), Ok(-(2f64.powi(127))));
        // Values around 2^24, 2^53, 2^60, 2^63, 2^64 - 1, 2^100 and 2^126, both signs.
        let mut values = Vec::new();
        for e in [24, 25, 53, 54, 60, 63, 64, 100, 126] {
            for d in -70i128..=70 {
                for step in [1i128, 1 << (e - 24), 1 << (e.max(53) - 53)] {
                    values.push((1i128 << e) + d * step);
                    values.push((1i128 << e) + d * step + 1);
                }
            }
        }
        // Pseudo-random 64- and 128-bit integers (xorshift).
        let mut r = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            r
        };
        for _ in 0..20_000 {
            let x = next();
            values.push(i128::from(x as i64));
            values.push(i128::from(x));
            values.push(i128::from(x >> (x % 40)));
            values.push((i128::from(next()) << 62) ^ i128::from(next()));
        }
        for n in values {
            for sign in [1, -1] {
                let n = n * sign;
                for (t, least) in [
                    (T::F32, 1i128 << 24),
                    (T::C64, 1 << 24),
                    (T::BF16, 1 << 8),
                    (T::F64, 1 << 53),
                    (T::C128, 1 << 53),
                ] {
                    if n.unsigned_abs() < least as u128 {
                        continue;
                    }
                    let part = match t {
                        T::C64 => T::F32,
                        T::C128 => T::F64,
                        t => t,
                    };
                    let got = stored(Scalar::Int(n), t).unwrap();
                    assert!(nearest_for_integer(n, part, got), "{n} as {t}: {got:#x}");
                }
            }
        }
    }

    #[test]
    fn integers_beyond_i128_round_once_too() {
        // 2^127 + 2^103 + 1 (as text, past i128): one past a float32 tie; its nearest
        // float32 is 2^127 + 2^104.
        let text = |x: u128| Scalar::BigInt(x.to_string().into());
        let x = (1u128 << 127) + (1 << 103) + 1;
        let got = stored(text(x), T::F32).unwrap();
        assert_eq!(
            f32::from_bits(got as u32),
            ((1u128 << 127) + (1 << 104)) as f32
        );
        let got = stored(text((1u128 << 127) + (1 << 103)), T::F32).unwrap();
        assert_eq!(f32::from_bits(got as u32), (1u128 << 127) as f32);
        let got = stored(text(x), T::BF16).unwrap();
        assert_eq!(half::bf16::from_bits(got as u16).to_f64(), 2f64.powi(127));
        let y = (1u128 << 127) + (1 << 119) + 1; // one past a bfloat16 tie
        let got = stored(text(y), T::BF16).unwrap();
        assert_eq!(
            half::bf16::from_bits(got as u16).to_f64(),
            2f64.powi(127) + 2f64.powi(120)
        );
        let got = stored(text(u128::MAX), T::F64).unwrap();
        assert_eq!(f64::from_bits(got), 2f64.powi(128));
        // Leading zeros and signs.
        assert_eq!(
            decimal_limbs("-000340282366920938463463374607431768211456"),
            Some((true, Some(vec![0, 0, 1])))
        );
        assert_eq!(
            decimal_limbs("+18446744073709551615"),
            Some((false, Some(vec![u64::MAX])))
        );
        assert_eq!(decimal_limbs("12a"), None);
        assert_eq!(decimal_limbs(&"9".repeat(401)), Some((false, None)));
        // float64's limit: its largest value (2^53 - 1) · 2^971 plus half an ulp (2^970)
        // rounds to even, up to 2^1024: an overflow; one less stays finite.
        let mut max = vec![0u64; 16];
        max[15] = u64::MAX << 11; // bits 971..1024 set
        assert_eq!(int_to_f64(false, &max, T::F64), Some(f64::MAX));
        max[15] |= 1 << 10; // + 2^970: the tie
        assert_eq!(int_to_f64(false, &max, T::F64), None);
        max[15] &= !(1 << 10);
        max[15] |= (1 << 10) - 1; // just below the tie
        max[..15].fill(u64::MAX);
        assert_eq!(int_to_f64(true, &max, T::F64), Some(-f64::MAX));
        // Rounded to odd for the narrower types: finite, and refused by the type's limit.
        assert_eq!(int_to_f64(false, &max, T::F32), Some(f64::MAX)); // odd: kept as is
        assert!(int_to_f64(
            false,
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            T::F32
        )
        .is_none());
        assert_eq!(int_to_f64(true, &[0, 0], T::F32), Some(0.0));
        assert!(int_to_f64(true, &[0, 0], T::F32)
            .unwrap()
            .is_sign_positive());
        let e = stored(text(1u128 << 127), T::F16).unwrap_err();
        assert!(e.contains("overflows float16"), "{e}");
    }

    proptest::proptest! {
        /// Any 128-bit integer into float32 and bfloat16, one past or at a tie or not:
        /// the nearest value, ties to even (with the exact integer distances).
        #[test]
        fn any_integer_rounds_to_the_nearest(n in proptest::prelude::any::<i128>(),
                                             low in 0u32..100) {
            let n = n >> low; // many magnitudes
            for t in [T::F32, T::BF16, T::F64] {
                let least: i128 = if t == T::F64 { 1 << 53 } else { 1 << 24 };
                if n.unsigned_abs() < least as u128 || n.unsigned_abs() >= 1 << 126 {
                    continue;
                }
                let got = stored(Scalar::Int(n), t).unwrap();
                proptest::prop_assert!(nearest_for_integer(n, t, got), "{} as {}: {:#x}", n, t, got);
            }
        }
    }

    #[test]
    fn nan_and_infinity_only_where_the_type_has_them() {
        let b = |x: f64, t| encode_float(x, t);
        assert_eq!(b(f64::NAN, T::F16), Ok(0x7E00));
        assert_eq!(b(-f64::NAN, T::F16), Ok(0xFE00));
        assert_eq!(b(f64::NAN, T::BF16), Ok(0x7FC0));
        assert_eq!(b(f64::INFINITY, T::BF16), Ok(0x7F80));
        assert_eq!(b(f64::NEG_INFINITY, T::F8E5M2), Ok(252));
        assert_eq!(b(f64::INFINITY, T::F8E4M3), Ok(120));
        assert_eq!(b(f64::NAN, T::F8E4M3), Ok(124));
        assert_eq!(b(f64::NAN, T::F8E3M4), Ok(120));
        assert_eq!(b(f64::NAN, T::F8E4M3FN), Ok(127));
        assert_eq!(b(-f64::NAN, T::F8E4M3FN), Ok(255));
        assert_eq!(b(f64::NAN, T::F8E5M2FNUZ), Ok(128));
        assert_eq!(b(f64::NAN, T::F8E8M0FNU), Ok(255));
        assert_eq!(b(f64::NAN, T::F32), Ok(0x7FC0_0000));
        assert_eq!(b(f64::INFINITY, T::F64), Ok(0x7FF0_0000_0000_0000));
        for t in [T::F4E2M1FN, T::F6E2M3FN, T::F6E3M2FN] {
            assert!(b(f64::NAN, t).unwrap_err().contains("no NaN"), "{t}");
        }
        for t in [T::F8E4M3FN, T::F8E4M3FNUZ, T::F4E2M1FN, T::F8E8M0FNU] {
            assert!(
                b(f64::INFINITY, t).unwrap_err().contains("no infinity"),
                "{t}"
            );
        }
    }

    #[test]
    fn decode_float_inverts_encode_float_for_every_code() {
        for &t in ElementType::ALL {
            let Some(f) = format_of(t) else { continue };
            if matches!(t, ElementType::F32 | ElementType::F64) {
                continue;
            }
            let width = f.exp + f.man + u32::from(f.specials != Specials::E8m0);
            for bits in 0..(1u64 << width) {
                let x = decode_float(bits, t).unwrap();
                if x.is_nan() {
                    assert!(
                        f.nan(false) == Some(bits)
                            || f.nan(true) == Some(bits)
                            || f.specials == Specials::Ieee,
                        "{t} {bits:#x}"
                    );
                    // The sign survives: a negative NaN converts to a negative NaN.
                    assert_eq!(
                        x.is_sign_negative(),
                        bits & f.sign_bit() != 0,
                        "{t} {bits:#x}"
                    );
                    continue;
                }
                assert_eq!(encode_float(x, t), Ok(bits), "{t} {bits:#x} decoded as {x}");
            }
        }
        assert_eq!(decode_float(0x3C, ElementType::F8E4M3FN), Some(1.5));
        assert_eq!(decode_float(0x7E, ElementType::F8E4M3FN), Some(448.0));
        assert!(decode_float(0x7F, ElementType::F8E4M3FN).unwrap().is_nan());
        assert_eq!(decode_float(0x7F, ElementType::F8E8M0FNU), Some(1.0));
        assert_eq!(decode_float(0xF, ElementType::F4E2M1FN), Some(-6.0));
        assert_eq!(decode_float(0x7C, ElementType::F8E5M2), Some(f64::INFINITY));
        assert_eq!(
            decode_float(0x80, ElementType::F8E4M3FN).map(f64::is_sign_negative),
            Some(true)
        );
        assert_eq!(decode_float(1, ElementType::S32), None);
    }

    #[test]
    fn every_float_type_round_trips_its_small_integers() {
        for &t in ElementType::ALL {
            let Some(f) = format_of(t) else { continue };
            // Integers up to 2^(man+1) are exact; decode and compare.
            let top = (1u64 << (f.man + 1)).min(f.max() as u64);
            for k in 1..=top.min(64) {
                if t == T::F8E8M0FNU && !k.is_power_of_two() {
                    continue;
                }
                let bits = encode_float(k as f64, t).unwrap();
                assert_eq!(decode(bits, f), k as f64, "{t} {k}");
            }
        }
    }

    /// Value of `bits` in format `f` (finite codes only), for the round-trip test.
    fn decode(bits: u64, f: Format) -> f64 {
        if f.specials == Specials::E8m0 {
            return pow2(bits as i32 - f.bias);
        }
        let man = bits & ((1 << f.man) - 1);
        let exp = ((bits >> f.man) & ((1 << f.exp) - 1)) as i32;
        let neg = bits & f.sign_bit() != 0 && f.specials != Specials::Fnuz;
        let v = if exp == 0 {
            man as f64 * pow2(1 - f.bias - f.man as i32)
        } else {
            (1.0 + man as f64 / (1u64 << f.man) as f64) * pow2(exp - f.bias)
        };
        if neg {
            -v
        } else {
            v
        }
    }

    #[test]
    fn errors_name_the_element() {
        let tree = l(vec![vec![1.0f64, 2.0].into(), vec![3.0f64, 1e6].into()]);
        let e = to_host(&tree, Some(T::F8E4M3FN)).unwrap_err().to_string();
        assert!(
            e.contains(
                ": 1000000.0 at index [1, 1] overflows float8_e4m3fn (largest finite value 448.0;"
            ),
            "{e}"
        );
        let e = err(vec![1e300f64], Some(T::BF16));
        assert!(
            e.contains(": 1e+300 at index [0] overflows bfloat16 (largest finite value 3.3895313892515355e+38;"),
            "{e}"
        );
        let huge = Nested::Scalar(Scalar::BigInt(format!("1{}", "0".repeat(400)).into()));
        let e = err(huge, Some(T::F64));
        assert!(e.contains("overflows float64"), "{e}");
        assert!(e.contains("...00000 (401 digits)") && e.len() < 200, "{e}");
        let e = err(vec![1.5e-5f64, 2.0], Some(T::S8));
        assert!(e.contains("1.5e-05"), "{e}");
        let e = err(vec![1i64, 300], Some(T::S8));
        assert!(
            e.contains(": 300 at index [1] does not fit in int8 (range -128..127;"),
            "{e}"
        );
        let e = err(Nested::from(300i64), Some(T::S8));
        assert!(e.contains(": 300 does not fit in int8"), "{e}");
        let e = err(vec![1.5f64], Some(T::S8));
        assert!(e.contains("(1.5 at index [0])"), "{e}");
        assert!(err(vec![1i64], Some(T::Token)).contains("no host representation"));
    }

    #[test]
    fn text_scalars() {
        assert_eq!(Scalar::parse("-3").unwrap(), Scalar::Int(-3));
        assert_eq!(Scalar::parse("true").unwrap(), Scalar::Bool(true));
        assert_eq!(Scalar::parse("1.5e3").unwrap(), Scalar::Float(1500.0));
        assert_eq!(
            Scalar::parse("-inf").unwrap(),
            Scalar::Float(f64::NEG_INFINITY)
        );
        assert_eq!(Scalar::parse("+9").unwrap(), Scalar::Int(9));
        // NaN takes a sign as Python's float() does, and keeps it.
        for (text, negative) in [("nan", false), ("+NaN", false), ("-nan", true)] {
            match Scalar::parse(text).unwrap() {
                Scalar::Float(x) => assert!(x.is_nan() && x.is_sign_negative() == negative),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(Scalar::parse("--nan").is_err());
        assert!(matches!(
            Scalar::parse(&"9".repeat(60)).unwrap(),
            Scalar::BigInt(_)
        ));
        for over in ["1e400", "-1e400", "1.7976931348623159e308", "1e99999999999"] {
            let e = Scalar::parse(over).unwrap_err().to_string();
            assert!(e.contains("out of range") && e.contains(over), "{e}");
        }
        for bad in ["", "-", "1.2.3", "infinit", "nana", "0x10", "e5", "1e"] {
            assert!(Scalar::parse(bad).is_err(), "{bad}");
        }
        // The words in any case, as Python's float() takes them and JSON output writes
        // them ("NaN" was refused while `run --json` wrote it).
        for (text, want) in [
            ("NaN", f64::NAN),
            ("nan", f64::NAN),
            ("Inf", f64::INFINITY),
            ("+Infinity", f64::INFINITY),
            ("infinity", f64::INFINITY),
            ("-INF", f64::NEG_INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ] {
            match Scalar::parse(text) {
                Ok(Scalar::Float(x)) => {
                    assert!(x == want || (x.is_nan() && want.is_nan()), "{text} -> {x}")
                }
                other => panic!("{text} -> {other:?}"),
            }
        }
        // The largest finite float64 is in range.
        assert_eq!(
            Scalar::parse("1.7976931348623157e308").unwrap(),
            Scalar::Float(f64::MAX)
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused(text in "[-+0-9.eE a-z]{0,24}") {
            if let Ok(Scalar::Float(x)) = Scalar::parse(&text) {
                let word = text.trim_start_matches(['-', '+']);
                let word = word.eq_ignore_ascii_case("inf")
                    || word.eq_ignore_ascii_case("infinity")
                    || text.eq_ignore_ascii_case("nan");
                proptest::prop_assert!(x.is_finite() || word, "{text} -> {x}");
            }
        }

        #[test]
        fn finite_floats_round_trip(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL) {
            proptest::prop_assert_eq!(Scalar::parse(&format!("{x:e}")).unwrap(), Scalar::Float(x));
        }
    }

    #[test]
    fn flat_values_need_matching_dims() {
        let v = values_to_host(&[Scalar::Int(1), Scalar::Int(2)], vec![2, 1], None).unwrap();
        assert_eq!((v.element_type, v.dims), (T::S64, vec![2, 1]));
        let e = values_to_host(&[Scalar::Int(1)], vec![2], None).unwrap_err();
        assert!(e.to_string().contains("1 values for dims [2]"), "{e}");
    }

    #[test]
    fn host_values_become_a_host_array() {
        let v = host(vec![1i64, -2, 3], Some(T::S4)).unwrap();
        let a = v.into_host_array();
        assert_eq!(a.element_type(), T::S4);
        assert_eq!(a.dims(), &[3]);
        assert_eq!(a.plan().unwrap().2, 3);
    }

    #[test]
    fn typed_arrays_convert_by_the_rule_for_numbers() {
        use ElementType as T;
        let f64s = |v: &[f64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        // Values that fit keep them; floats round to the nearest.
        let ok = convert(&f64s(&[0.1, -2.5, 1e30]), T::F64, vec![3], T::F32).unwrap();
        let back: Vec<f32> = ok
            .bytes
            .chunks(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, vec![0.1f32, -2.5, 1e30]);
        let ints: Vec<u8> = [300i64, 1].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let e = convert(&ints, T::S64, vec![2], T::S8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("300 at index [0] does not fit in int8"), "{e}");
        assert_eq!(
            convert(&ints, T::S64, vec![2], T::S16).unwrap().bytes,
            [44u8, 1, 1, 0]
        );
        // Kinds: no float into an integer (not even 2.0), no complex into a real type.
        let e = convert(&f64s(&[2.0]), T::F64, vec![1], T::S32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("float values cannot be stored as int32"), "{e}");
        let c = f64s(&[1.0, 0.0]);
        let e = convert(&c, T::C128, vec![], T::F64)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("complex values cannot be stored as float64"),
            "{e}"
        );
        // Overflow and specials.
        let e = convert(&f64s(&[1.0, 1e40]), T::F64, vec![2], T::F32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at index [1] overflows float32"), "{e}");
        assert!(convert(&f64s(&[f64::INFINITY]), T::F64, vec![1], T::F8E4M3FN).is_err());
        assert!(convert(&f64s(&[f64::NAN, f64::INFINITY]), T::F64, vec![2], T::BF16).is_ok());
        // Sub-byte sources in either form, and bools.
        let s4 = convert(&[0x0e, 0xfe, 0x07], T::S4, vec![3], T::S8).unwrap();
        assert_eq!(s4.bytes, [0xfe, 0xfe, 0x07]);
        assert!(convert(&[0x17], T::S4, vec![1], T::S8).is_err());
        assert_eq!(
            convert(&[0, 1, 1], T::Pred, vec![3], T::F16)
                .unwrap()
                .bytes
                .len(),
            6
        );
        let e = convert(&[2, 1], T::S8, vec![2], T::Pred)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not fit in bool"), "{e}");
        // Lengths and empty arrays.
        assert!(convert(&[1, 2, 3], T::S8, vec![2], T::S16).is_err());
        assert_eq!(
            convert(&[], T::F64, vec![0, 3], T::S8).unwrap().bytes,
            Vec::<u8>::new()
        );
    }

    /// NaNs as numpy 2.4 and ml_dtypes 0.7 convert them on x86-64 (`astype`), bit for bit.
    #[test]
    fn nans_convert_as_numpy_converts_them() {
        let cases: &[(u64, T, T, u64)] = &[
            // The same type: the same bits, signalling or not.
            (0x7FF8_0000_0000_0123, T::F64, T::F64, 0x7FF8_0000_0000_0123),
            (0xFFF0_0000_0000_0001, T::F64, T::F64, 0xFFF0_0000_0000_0001),
            (0x7F80_0001, T::F32, T::F32, 0x7F80_0001),
            (0x7C01, T::F16, T::F16, 0x7C01),
            (0xFF81, T::BF16, T::BF16, 0xFF81),
            (0x7D, T::F8E5M2, T::F8E5M2, 0x7D),
            (0xFF, T::F8E4M3FN, T::F8E4M3FN, 0xFF),
            // float64 into float32: the top payload bits, quiet bit set.
            (0x7FFC_0000_0000_0123, T::F64, T::F32, 0x7FE0_0000),
            (0xFFF0_0000_0000_0001, T::F64, T::F32, 0xFFC0_0000),
            // float32 into float64: widened, quiet bit set.
            (0x7F80_0001, T::F32, T::F64, 0x7FF8_0000_2000_0000),
            // numpy's float16 code: truncated or widened, no quiet bit, never an infinity.
            (0x7FC1_2000, T::F32, T::F16, 0x7E09),
            (0x7F80_0001, T::F32, T::F16, 0x7C01),
            (0xFFF0_0000_0000_0123, T::F64, T::F16, 0xFC01),
            (0x7C01, T::F16, T::F32, 0x7F80_2000),
            (0xFC01, T::F16, T::F64, 0xFFF0_0400_0000_0000),
            // bfloat16 out: into float32 widened, into float64 as through float32.
            (0x7F81, T::BF16, T::F32, 0x7F81_0000),
            (0x7F81, T::BF16, T::F64, 0x7FF8_2000_0000_0000),
            // Into bfloat16 and float8, and out of float8: the type's NaN, with the sign.
            (0x7FF0_0000_0000_0001, T::F64, T::BF16, 0x7FC0),
            (0xFF80_0001, T::F32, T::F8E5M2, 0xFE),
            (0xFC01, T::F16, T::F8E4M3FN, 0xFF),
            (0xFF81, T::BF16, T::F16, 0xFE00),
            (0x7D, T::F8E5M2, T::F32, 0x7FC0_0000),
            (0xFD, T::F8E5M2, T::F8E4M3, 0xFC),
            (0x80, T::F8E4M3FNUZ, T::F16, 0xFE00),
            (0x80, T::F8E5M2FNUZ, T::F8E4M3B11FNUZ, 0x80),
            (0xFF, T::F8E8M0FNU, T::F64, 0x7FF8_0000_0000_0000),
            (0xFFF8_0000_0000_0000, T::F64, T::F8E8M0FNU, 0xFF),
        ];
        for &(bits, from, to, want) in cases {
            assert_eq!(
                convert_nan(bits, from, to),
                Ok(want),
                "{bits:#x} {from} -> {to}"
            );
            // The same through a host array of `from` and through a scalar read from it.
            let size = from.host_itemsize();
            let v = convert(&bits.to_ne_bytes()[..size], from, vec![], to).unwrap();
            let mut got = [0u8; 8];
            got[..v.bytes.len()].copy_from_slice(&v.bytes);
            assert_eq!(u64::from_ne_bytes(got), want, "{bits:#x} {from} -> {to}");
            let x = Scalar::Float(decode_float(bits, from).unwrap());
            let v = values_to_host_from(&[x], &[(0, from)], vec![], Some(to)).unwrap();
            assert_eq!(
                v.bytes[..],
                got[..v.bytes.len()],
                "{bits:#x} {from} -> {to}"
            );
        }
        assert!(convert_nan(0x7E00, T::F16, T::F4E2M1FN)
            .unwrap_err()
            .contains("no NaN"));
    }

    #[test]
    fn python_float_nans_keep_their_payload() {
        let x = f64::from_bits(0x7FF0_0000_0000_0123);
        let v = host(x, None).unwrap();
        assert_eq!(v.bytes, 0x7FF0_0000_0000_0123u64.to_ne_bytes());
        let v = host(Nested::Scalar(Scalar::Complex(x, -x)), Some(T::C64)).unwrap();
        assert_eq!(
            v.bytes,
            [0x7FC0_0000u32, 0xFFC0_0000].map(u32::to_ne_bytes).concat()
        );
        // A complex64 NaN part is read as float32, into complex128 widened and quieted.
        let part = 0x7F80_0001u64;
        let c = [part as u32, 0x3F80_0000].map(u32::to_ne_bytes).concat();
        let v = convert(&c, T::C64, vec![], T::C128).unwrap();
        assert_eq!(
            v.bytes,
            [0x7FF8_0000_2000_0000u64, 1f64.to_bits()]
                .map(u64::to_ne_bytes)
                .concat()
        );
    }

    #[test]
    fn every_ieee_nan_reads_back_exactly() {
        for t in [T::F16, T::BF16, T::F8E5M2, T::F8E4M3, T::F8E3M4] {
            let width = t.bit_width();
            for bits in 0..1u64 << width {
                let x = decode_float(bits, t).unwrap();
                if x.is_nan() {
                    assert_eq!(nan_source_bits(x, t), bits, "{t} {bits:#x}");
                    assert_eq!(convert_nan(bits, t, t), Ok(bits), "{t} {bits:#x}");
                }
            }
        }
        let e = values_to_host_from(&[Scalar::Float(1.0)], &[(1, T::F32)], vec![1], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not one of the 1 values"), "{e}");
    }
}

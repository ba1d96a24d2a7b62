//! Exact Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`).
//!
//! A [`Quantity`] is an `i128` count of nano-units (10^-9), the finest precision Kubernetes
//! keeps, so parsing, comparison and arithmetic are exact integer operations (no floats, no
//! big numbers). Magnitudes are bounded to 2^63-1 whole units; where upstream silently caps
//! or overflows, this module returns a [`QuantityError`] instead. Canonical strings follow
//! upstream `Quantity.String()` (`CanonicalizeBytes`).

use core::cmp::Ordering;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::str::FromStr;

/// Nano-units per whole unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_UNIT_I64: i64 = 1_000_000_000;
/// Largest allowed magnitude in whole units: 2^63-1.
const MAX_UNITS: i128 = i64::MAX as i128;
/// Largest allowed magnitude in nano-units.
const MAX_NANOS: i128 = MAX_UNITS * NANOS_PER_UNIT;
/// Exponents are saturated at this magnitude while parsing; any value this far out is
/// already decided (zero, one nano, or out of range) whatever the real exponent is.
const EXPONENT_CAP: i128 = 1_000_000_000_000_000_000_000_000_000_000;
/// Inputs echoed in error messages are cut after this many characters.
const ECHO_LIMIT: usize = 40;

/// How the quantity was written; kept so that canonical output looks like the input style.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of ten with SI suffixes: `n u m "" k M G T P E` (e.g. `500m`, `2k`).
    DecimalSI,
    /// Powers of 1024 with IEC suffixes: `Ki Mi Gi Ti Pi Ei` (e.g. `1536Mi`).
    BinarySI,
    /// Powers of ten written as an exponent (e.g. `12e6`, `5e-3`).
    DecimalExponent,
}

/// An exact Kubernetes quantity: an `i128` count of nano-units (10^-9) plus the
/// [`Format`] used to print it. Equality, ordering and hashing use the value only.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Why a string is not a well-formed quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyntaxError {
    /// The string contains whitespace (Kubernetes does not trim it).
    Whitespace,
    /// More than one leading `+`/`-` sign.
    MultipleSigns,
    /// No digits where the number should be (e.g. `abc`, `-`, `.`, `Ki`).
    MissingNumber,
    /// The number has more than one `.`.
    MultipleDecimalPoints,
    /// The text after the number is not a known suffix; holds that text (cut to ~40 chars).
    UnknownSuffix(String),
    /// `e`/`E` followed by an optional sign but no exponent digits (e.g. `1e`, `1e-`).
    MissingExponent,
    /// The exponent is not an integer; holds the exponent text (e.g. `1.5` for `1e1.5`).
    InvalidExponent(String),
}

/// The arithmetic operation that overflowed in [`QuantityError::Overflow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithmeticOp {
    /// `checked_add`.
    Add,
    /// `checked_sub`.
    Sub,
}

/// Errors from parsing quantities and from checked arithmetic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// The input string was empty.
    Empty,
    /// The input is not a well-formed quantity; `input` is the input cut to ~40 chars.
    Invalid {
        /// The offending input (cut to ~40 characters, control characters escaped).
        input: String,
        /// What is wrong with it.
        reason: SyntaxError,
    },
    /// The value's magnitude exceeds 2^63-1 whole units.
    OutOfRange {
        /// The offending input (cut to ~40 characters, control characters escaped).
        input: String,
        /// Whether the value was negative (too small) rather than too large.
        negative: bool,
    },
    /// `lhs op rhs` exceeds 2^63-1 whole units in magnitude.
    Overflow {
        /// The operation.
        op: ArithmeticOp,
        /// The left operand.
        lhs: Quantity,
        /// The right operand.
        rhs: Quantity,
    },
}

impl Quantity {
    /// Zero (DecimalSI).
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// Parses a Kubernetes quantity string (`1.5Gi`, `500m`, `12e6`, ...) exactly.
    ///
    /// Non-zero values finer than one nano are rounded away from zero to the next nano, as
    /// upstream does (`0.1n` is `1n`); magnitudes above 2^63-1 units are an error.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        parse_quantity(s)
    }

    /// `v` whole units (bytes, cores); `i64::MIN` is clamped to -(2^63-1).
    pub fn from_value(v: i64, format: Format) -> Quantity {
        Quantity {
            nanos: wide_mul(i128::from(v).max(-MAX_UNITS), NANOS_PER_UNIT),
            format,
        }
    }

    /// `m` thousandths of a unit (millicores), exactly.
    pub fn from_milli(m: i64, format: Format) -> Quantity {
        Quantity {
            nanos: i128::from(m) * 1_000_000,
            format,
        }
    }

    /// The format used by [`Quantity::to_canonical_string`].
    pub fn format(&self) -> Format {
        self.format
    }

    /// The exact value in nano-units (10^-9 units).
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Kubernetes `Value()`: the value in whole units, rounded up (ceiling, toward +inf).
    /// Never overflows: quantities are bounded to ±(2^63-1) units.
    pub fn value(&self) -> i64 {
        saturate_i64(div_ceil(self.nanos, NANOS_PER_UNIT))
    }

    /// Kubernetes `MilliValue()`: `ceil(q * 1000)`, saturated at `i64::MAX`/`i64::MIN`
    /// when it does not fit (above about 9.2e15 units); see [`Quantity::checked_milli_value`].
    pub fn milli_value(&self) -> i64 {
        saturate_i64(div_ceil(self.nanos, 1_000_000))
    }

    /// `ceil(q * 1000)`, or `None` if that does not fit in an `i64`.
    pub fn checked_milli_value(&self) -> Option<i64> {
        i64::try_from(div_ceil(self.nanos, 1_000_000)).ok()
    }

    /// Exact sum, in `self`'s format (or `other`'s if `self` is zero, as upstream `Add`);
    /// an error if the magnitude exceeds 2^63-1 units.
    pub fn checked_add(self, other: Quantity) -> Result<Quantity, QuantityError> {
        self.checked(ArithmeticOp::Add, other)
    }

    /// Exact difference, in `self`'s format (or `other`'s if `self` is zero, as upstream
    /// `Sub`); an error if the magnitude exceeds 2^63-1 units.
    pub fn checked_sub(self, other: Quantity) -> Result<Quantity, QuantityError> {
        self.checked(ArithmeticOp::Sub, other)
    }

    /// Sum clamped to ±(2^63-1) units; format as [`Quantity::checked_add`].
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        self.combine(self.nanos + other.nanos, other).clamped()
    }

    /// Difference clamped to ±(2^63-1) units; format as [`Quantity::checked_sub`].
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        self.combine(self.nanos - other.nanos, other).clamped()
    }

    /// The larger value (with its own format); `self` on a tie.
    pub fn max(self, other: Quantity) -> Quantity {
        if other.nanos > self.nanos {
            other
        } else {
            self
        }
    }

    /// The smaller value (with its own format); `self` on a tie.
    pub fn min(self, other: Quantity) -> Quantity {
        if other.nanos < self.nanos {
            other
        } else {
            self
        }
    }

    /// Upstream `RoundUp(Milli)` (API defaulting of resource lists): rounds the magnitude up
    /// to a whole milli-unit, away from zero (`1.0001` -> `1001m`, `-1.5m` -> `-2m`), keeping the format.
    pub fn round_up_to_milli(self) -> Quantity {
        const MILLI: i128 = 1_000_000;
        let magnitude = div_ceil(self.nanos.abs(), MILLI) * MILLI;
        Quantity {
            nanos: if self.nanos < 0 {
                -magnitude
            } else {
                magnitude
            },
            format: self.format,
        }
    }

    /// The canonical string, exactly as upstream `Quantity.String()` prints a freshly
    /// computed value (`1.5Gi` -> `1536Mi`, `1.5` -> `1500m`, `2000` -> `2k`).
    pub fn to_canonical_string(&self) -> String {
        if self.nanos == 0 {
            return "0".to_owned();
        }
        // 64-bit work wherever the value allows: i128 multiplication and
        // division are libcalls (and slower still in wasm). Whole units
        // always fit an i64 (|nanos| <= MAX_NANOS).
        let (units, whole) = match i64::try_from(self.nanos) {
            Ok(nanos) => (nanos / NANOS_PER_UNIT_I64, nanos % NANOS_PER_UNIT_I64 == 0),
            Err(_) => {
                let units = self.nanos / NANOS_PER_UNIT;
                (units as i64, units * NANOS_PER_UNIT == self.nanos)
            }
        };
        if self.format == Format::BinarySI && whole && units.unsigned_abs() >= 1024 {
            let mut mantissa = units;
            let mut power = 0;
            while power < 6 && mantissa % 1024 == 0 {
                mantissa /= 1024;
                power += 1;
            }
            const BINARY: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            return with_suffix(mantissa, BINARY[power]);
        }
        // Strip trailing zeros in groups of three: mantissa * 10^exponent, exponent >= -9.
        let (mut mantissa, mut exponent) = if whole {
            (units, 0)
        } else if let Ok(nanos) = i64::try_from(self.nanos) {
            (nanos, -9)
        } else {
            return self.wide_canonical_string();
        };
        while mantissa % 1000 == 0 {
            mantissa /= 1000;
            exponent += 3;
        }
        decimal_text(self.format, mantissa, exponent)
    }

    /// [`Quantity::to_canonical_string`] for a fraction whose nano count
    /// does not fit an i64 (above about 9.2e9 units), in i128 throughout.
    fn wide_canonical_string(&self) -> String {
        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 1000 == 0 {
            mantissa /= 1000;
            exponent += 3;
        }
        decimal_text(self.format, mantissa, exponent)
    }

    fn checked(self, op: ArithmeticOp, other: Quantity) -> Result<Quantity, QuantityError> {
        let nanos = match op {
            ArithmeticOp::Add => self.nanos + other.nanos,
            ArithmeticOp::Sub => self.nanos - other.nanos,
        };
        if nanos.abs() > MAX_NANOS {
            return Err(QuantityError::Overflow {
                op,
                lhs: self,
                rhs: other,
            });
        }
        Ok(self.combine(nanos, other))
    }

    /// Upstream `Add`/`Sub`: the receiver keeps its format unless it is zero.
    fn combine(self, nanos: i128, other: Quantity) -> Quantity {
        let format = if self.is_zero() {
            other.format
        } else {
            self.format
        };
        Quantity { nanos, format }
    }

    fn clamped(self) -> Quantity {
        Quantity {
            nanos: self.nanos.clamp(-MAX_NANOS, MAX_NANOS),
            format: self.format,
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

/// [`Quantity::ZERO`].
impl Default for Quantity {
    fn default() -> Quantity {
        Quantity::ZERO
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Quantity, QuantityError> {
        parse_quantity(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.to_canonical_string())
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyntaxError::Whitespace => f.write_str("whitespace is not allowed"),
            SyntaxError::MultipleSigns => f.write_str("only one leading `+` or `-` is allowed"),
            SyntaxError::MissingNumber => {
                f.write_str("expected a number such as `1`, `1.5` or `.5` before any suffix")
            }
            SyntaxError::MultipleDecimalPoints => f.write_str("more than one decimal point"),
            SyntaxError::UnknownSuffix(suffix) => write!(
                f,
                "unknown suffix `{suffix}` (expected one of n, u, m, k, M, G, T, P, E, \
                 Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
            ),
            SyntaxError::MissingExponent => {
                f.write_str("`e`/`E` must be followed by an integer exponent, as in `1e3`")
            }
            SyntaxError::InvalidExponent(exponent) => {
                write!(f, "exponent `{exponent}` is not an integer")
            }
        }
    }
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const TOO_LARGE: &str =
            "is too large: quantities must be at most 2^63-1 (9223372036854775807)";
        const TOO_SMALL: &str =
            "is too small: quantities must be at least -(2^63-1) (-9223372036854775807)";
        match self {
            QuantityError::Empty => f.write_str("quantity is empty"),
            QuantityError::Invalid { input, reason } => {
                write!(f, "`{input}` is not a valid quantity: {reason}")
            }
            QuantityError::OutOfRange { input, negative } => {
                write!(
                    f,
                    "`{input}` {}",
                    if *negative { TOO_SMALL } else { TOO_LARGE }
                )
            }
            QuantityError::Overflow { op, lhs, rhs } => {
                let (sign, negative) = match op {
                    ArithmeticOp::Add => ('+', lhs.nanos + rhs.nanos < 0),
                    ArithmeticOp::Sub => ('-', lhs.nanos - rhs.nanos < 0),
                };
                let limit = if negative { TOO_SMALL } else { TOO_LARGE };
                write!(f, "the result of `{lhs} {sign} {rhs}` {limit}")
            }
        }
    }
}

impl core::error::Error for QuantityError {}

/// The decimal SI suffix of `10^exponent`, if it has one.
fn si_suffix(exponent: i32) -> Option<&'static str> {
    match exponent {
        -9 => Some("n"),
        -6 => Some("u"),
        -3 => Some("m"),
        0 => Some(""),
        3 => Some("k"),
        6 => Some("M"),
        9 => Some("G"),
        12 => Some("T"),
        15 => Some("P"),
        18 => Some("E"),
        _ => None,
    }
}

/// `mantissa * 10^exponent` as upstream prints it: with the SI suffix of
/// the exponent, unless the format asks for `e<n>` or no suffix fits.
fn decimal_text(
    format: Format,
    mantissa: impl itoa::Integer + fmt::Display,
    exponent: i32,
) -> String {
    match (format, si_suffix(exponent)) {
        (Format::DecimalExponent, _) | (_, None) if exponent != 0 => {
            format!("{mantissa}e{exponent}")
        }
        (_, suffix) => with_suffix(mantissa, suffix.unwrap_or("")),
    }
}

/// `mantissa` in decimal followed by `suffix`, without the `fmt` machinery.
fn with_suffix(mantissa: impl itoa::Integer, suffix: &str) -> String {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(mantissa);
    let mut out = String::with_capacity(digits.len() + suffix.len());
    out.push_str(digits);
    out.push_str(suffix);
    out
}

/// `a * b`, exact for any operands whose product fits an i128: one 64-bit
/// multiplication when the operands and the product fit an i64 (the usual
/// case), since 128-bit multiplication is a libcall, and slower still in
/// wasm.
fn wide_mul(a: i128, b: i128) -> i128 {
    if let (Ok(a64), Ok(b64)) = (i64::try_from(a), i64::try_from(b))
        && (b64 == 0 || a64.unsigned_abs() <= i64::MAX.unsigned_abs() / b64.unsigned_abs())
    {
        return i128::from(a64 * b64);
    }
    a * b
}

/// `a * b / d`, truncated toward zero (Go's int64 `/`), exact for any
/// operands whose product fits an i128; `d` must not be zero. The
/// multiplication is `wide_mul`'s, and the division 64-bit when the
/// product and `d` fit an i64 (128-bit division is a libcall too).
pub fn mul_div(a: i128, b: i128, d: i128) -> i128 {
    let product = wide_mul(a, b);
    match (i64::try_from(product), i64::try_from(d)) {
        // i64::MIN / -1 is the one 64-bit quotient that overflows.
        (Ok(p), Ok(d)) if !(p == i64::MIN && d == -1) => i128::from(p / d),
        _ => product / d,
    }
}

/// `ceil(n / d)` for `d > 0`.
fn div_ceil(n: i128, d: i128) -> i128 {
    // Most quantities fit 64 bits, where division is one instruction rather
    // than an i128 libcall.
    if let (Ok(n), Ok(d)) = (i64::try_from(n), i64::try_from(d))
        && d > 0
    {
        return i128::from(n.div_euclid(d) + i64::from(n.rem_euclid(d) != 0));
    }
    let q = n.div_euclid(d);
    if n.rem_euclid(d) == 0 { q } else { q + 1 }
}

fn saturate_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

/// `s` cut to [`ECHO_LIMIT`] characters (then `…`), control characters escaped.
fn echo(s: &str) -> String {
    let mut out = String::new();
    for (count, c) in s.chars().enumerate() {
        if count == ECHO_LIMIT {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The scale a suffix applies to the number.
#[derive(Clone, Copy)]
enum Multiplier {
    /// `* 10^e`.
    Decimal(i128),
    /// `* 1024^k`.
    Binary(u32),
}

/// `10^i` for every `i` an i128 holds (a table: computing a power is a
/// chain of 128-bit multiplications, each a libcall in wasm).
const POWERS_OF_TEN: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < table.len() {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// The plain form almost every manifest uses, `<digits><suffix>` with at
/// most 18 digits and an SI or binary suffix (`256Mi`, `100m`, `2`), exactly
/// as the general parser reads it; `None` hands anything else to that parser.
fn parse_plain(s: &str) -> Option<Quantity> {
    let bytes = s.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 18 {
        return None;
    }
    // At most 18 digits fit a u64; 64-bit multiplications are one wasm
    // instruction where 128-bit ones are a libcall.
    let value = bytes[..digits]
        .iter()
        .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
    let (multiplier, format) = fixed_suffix(&s[digits..])?;
    let factor = match multiplier {
        Multiplier::Decimal(e) if e >= -9 => *POWERS_OF_TEN.get(usize::try_from(e + 9).ok()?)?,
        Multiplier::Decimal(_) => return None,
        Multiplier::Binary(k) => NANOS_PER_UNIT << (10 * k),
    };
    let nanos = match u64::try_from(factor) {
        // No overflow, and below MAX_NANOS (u64::MAX < 2^63 * 10^9).
        Ok(small) if value <= u64::MAX / small => i128::from(value * small),
        _ => i128::from(value).checked_mul(factor)?,
    };
    if nanos > MAX_NANOS {
        return None;
    }
    // As in the general parser: binary strictly between 0 and 1 prints as DecimalSI.
    let format = if format == Format::BinarySI && nanos > 0 && nanos < NANOS_PER_UNIT {
        Format::DecimalSI
    } else {
        format
    };
    Some(Quantity { nanos, format })
}

fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    parse_plain(s).map_or_else(|| parse_general(s), Ok)
}

/// Every form upstream accepts: signs, fractions, exponents, and the errors.
fn parse_general(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = |reason| {
        Err(QuantityError::Invalid {
            input: echo(s),
            reason,
        })
    };
    if s.chars().any(char::is_whitespace) {
        return invalid(SyntaxError::Whitespace);
    }
    let bytes = s.as_bytes();
    let (negative, mut pos) = match bytes[0] {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    if matches!(bytes.get(pos), Some(b'+' | b'-')) {
        return invalid(SyntaxError::MultipleSigns);
    }
    let count_digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let int_end = pos + count_digits(pos);
    let int_digits = &bytes[pos..int_end];
    pos = int_end;
    let mut frac_digits: &[u8] = &[];
    if bytes.get(pos) == Some(&b'.') {
        let start = pos + 1;
        pos = start + count_digits(start);
        frac_digits = &bytes[start..pos];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return invalid(SyntaxError::MissingNumber);
    }
    // `pos` only moved over ASCII bytes, so it is a char boundary.
    let suffix = &s[pos..];
    if suffix.starts_with('.') {
        return invalid(SyntaxError::MultipleDecimalPoints);
    }
    let (multiplier, format) = match parse_suffix(suffix) {
        Ok(parsed) => parsed,
        Err(reason) => return invalid(reason),
    };
    let Some(magnitude) =
        magnitude_nanos(int_digits, frac_digits, multiplier).filter(|m| *m <= MAX_NANOS)
    else {
        return Err(QuantityError::OutOfRange {
            input: echo(s),
            negative,
        });
    };
    // Upstream prints a binary quantity strictly between -1 and 1 as DecimalSI.
    let format = if format == Format::BinarySI && magnitude > 0 && magnitude < NANOS_PER_UNIT {
        Format::DecimalSI
    } else {
        format
    };
    Ok(Quantity {
        nanos: if negative { -magnitude } else { magnitude },
        format,
    })
}

/// The SI and binary suffixes (not the `e<n>` exponent forms).
fn fixed_suffix(suffix: &str) -> Option<(Multiplier, Format)> {
    let decimal = |e| Some((Multiplier::Decimal(e), Format::DecimalSI));
    let binary = |k| Some((Multiplier::Binary(k), Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => None,
    }
}

fn parse_suffix(suffix: &str) -> Result<(Multiplier, Format), SyntaxError> {
    if let Some(parsed) = fixed_suffix(suffix) {
        return Ok(parsed);
    }
    let Some(rest) = suffix.strip_prefix(['e', 'E']) else {
        return Err(SyntaxError::UnknownSuffix(echo(suffix)));
    };
    let (negative, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() {
        return Err(SyntaxError::MissingExponent);
    }
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(
            if digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                SyntaxError::InvalidExponent(echo(rest))
            } else {
                SyntaxError::UnknownSuffix(echo(suffix))
            },
        );
    }
    let exponent = digits.bytes().fold(0i128, |acc, c| {
        (acc * 10 + i128::from(c - b'0')).min(EXPONENT_CAP)
    });
    Ok((
        Multiplier::Decimal(if negative { -exponent } else { exponent }),
        Format::DecimalExponent,
    ))
}

/// The digits of `<int>.<frac>` viewed as one sequence without copying.
struct Digits<'a> {
    int: &'a [u8],
    frac: &'a [u8],
}

impl Digits<'_> {
    fn at(&self, i: usize) -> u8 {
        let c = if i < self.int.len() {
            self.int[i]
        } else {
            self.frac[i - self.int.len()]
        };
        c - b'0'
    }

    fn first_nonzero(&self) -> Option<usize> {
        let nonzero = |c: &u8| *c != b'0';
        self.int.iter().position(nonzero).or_else(|| {
            self.frac
                .iter()
                .position(nonzero)
                .map(|p| p + self.int.len())
        })
    }

    fn last_nonzero(&self) -> Option<usize> {
        let nonzero = |c: &u8| *c != b'0';
        self.frac
            .iter()
            .rposition(nonzero)
            .map(|p| p + self.int.len())
            .or_else(|| self.int.iter().rposition(nonzero))
    }

    /// The integer spelled by digits `from..=to`, or `None` on i128 overflow.
    fn integer(&self, from: usize, to: usize) -> Option<i128> {
        (from..=to).try_fold(0i128, |acc, i| {
            acc.checked_mul(10)?.checked_add(i128::from(self.at(i)))
        })
    }
}

/// The magnitude of `<int>.<frac> * multiplier` in nano-units, rounded away from zero to a
/// whole nano; `None` when it certainly exceeds 2^63-1 units. Never overflows and runs in
/// time linear in the number of digits, whatever the exponent.
fn magnitude_nanos(int: &[u8], frac: &[u8], multiplier: Multiplier) -> Option<i128> {
    let digits = Digits { int, frac };
    let (Some(lo), Some(hi)) = (digits.first_nonzero(), digits.last_nonzero()) else {
        return Some(0);
    };
    let (exp10, bits) = match multiplier {
        Multiplier::Decimal(e) => (e, 0),
        Multiplier::Binary(k) => (0, 10 * k),
    };
    // Decimal place (power of ten) of digit `i`.
    let place = |i: usize| int.len() as i128 - 1 - i as i128 + exp10;
    if place(lo) >= 19 {
        // At least 10^19 > 2^63-1 before any binary multiplier.
        return None;
    }
    let factor: i128 = 1 << bits;
    let shift = place(hi) + 9;
    if shift >= 0 {
        // Whole nanos: at most 28 significant digits here, times 10^shift stays below 10^28.
        let ten_pow = 10i128.checked_pow(u32::try_from(shift).ok()?)?;
        return digits
            .integer(lo, hi)?
            .checked_mul(ten_pow)?
            .checked_mul(factor);
    }
    // Digits at index <= last_whole are whole nanos, later ones are finer than a nano.
    let last_whole = int.len() as i128 + exp10 + 8;
    let whole = if last_whole >= lo as i128 {
        digits.integer(lo, usize::try_from(last_whole).ok()?)?
    } else {
        0
    };
    if bits == 0 {
        // The last significant digit is non-zero and below one nano: round up.
        return Some(whole + 1);
    }
    // Long multiplication of the sub-nano digits by 2^bits, least significant first; the
    // final carry is the whole nanos it contributes, any non-zero output digit is a remainder.
    let first_frac = usize::try_from(last_whole + 1).map_or(lo, |f| f.max(lo));
    let factor_u = factor.unsigned_abs();
    let mut carry: u128 = 0;
    let mut inexact = false;
    for i in (first_frac..=hi).rev() {
        let t = u128::from(digits.at(i)) * factor_u + carry;
        inexact |= !t.is_multiple_of(10);
        carry = t / 10;
    }
    // Implicit zeros between the last whole-nano place and the first significant digit.
    let mut zeros = first_frac as i128 - (last_whole + 1);
    while zeros > 0 && carry != 0 {
        inexact |= !carry.is_multiple_of(10);
        carry /= 10;
        zeros -= 1;
    }
    let carried = i128::try_from(carry).ok()?;
    whole
        .checked_mul(factor)?
        .checked_add(carried)?
        .checked_add(i128::from(inexact))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::DefaultHasher;

    /// The plain-form fast path reads every input it takes exactly as the
    /// general parser does, value and format, and declines the rest.
    #[test]
    fn plain_fast_path_matches_the_general_parser() {
        let numbers = [
            "0",
            "00",
            "1",
            "7",
            "10",
            "999",
            "1000",
            "1024",
            "0001024",
            "123456789",
            "999999999999999999",
            "9223372036854775807",
            "100000000000000000",
            "9223372",
            "9223373",
            "8796093022208",
            // Around u64::MAX nanos (18446744073.709551615 units), where
            // the 64-bit multiplication hands over to the 128-bit one.
            "18446744073",
            "18446744074",
            "18446744073709",
            "18014398509",
            "17592186044416",
        ];
        let suffixes = [
            "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e3", "E-2", "mi", "K", " ", ".5", "i",
        ];
        let mut taken = 0;
        for number in numbers {
            for suffix in suffixes {
                let input = format!("{number}{suffix}");
                let general = parse_general(&input);
                match parse_plain(&input) {
                    Some(fast) => {
                        taken += 1;
                        let general = general.unwrap_or_else(|e| panic!("{input}: {e}"));
                        assert_eq!(
                            (fast.nanos(), fast.format()),
                            (general.nanos(), general.format()),
                            "{input}"
                        );
                    }
                    None => assert!(
                        number.len() > 18
                            || !suffix.chars().all(char::is_alphabetic)
                            || general.is_err(),
                        "{input} declined but plain"
                    ),
                }
            }
        }
        assert!(taken >= 150, "the fast path took only {taken} inputs");
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    const N: i128 = NANOS_PER_UNIT;

    #[test]
    fn parse_table() {
        use Format::*;
        let ki: i128 = 1024;
        let cases: &[(&str, i128, Format, &str)] = &[
            ("0", 0, DecimalSI, "0"),
            ("-0", 0, DecimalSI, "0"),
            ("+0.000", 0, DecimalSI, "0"),
            ("0Ki", 0, BinarySI, "0"),
            ("1", N, DecimalSI, "1"),
            ("+1", N, DecimalSI, "1"),
            ("01", N, DecimalSI, "1"),
            ("1n", 1, DecimalSI, "1n"),
            ("1u", 1_000, DecimalSI, "1u"),
            ("1m", 1_000_000, DecimalSI, "1m"),
            ("1k", 1_000 * N, DecimalSI, "1k"),
            ("1M", 1_000_000 * N, DecimalSI, "1M"),
            ("1G", 10i128.pow(18), DecimalSI, "1G"),
            ("1T", 10i128.pow(21), DecimalSI, "1T"),
            ("1P", 10i128.pow(24), DecimalSI, "1P"),
            ("1E", 10i128.pow(27), DecimalSI, "1E"),
            ("1Ki", ki * N, BinarySI, "1Ki"),
            ("1Mi", ki.pow(2) * N, BinarySI, "1Mi"),
            ("1Gi", ki.pow(3) * N, BinarySI, "1Gi"),
            ("1Ti", ki.pow(4) * N, BinarySI, "1Ti"),
            ("1Pi", ki.pow(5) * N, BinarySI, "1Pi"),
            ("1Ei", ki.pow(6) * N, BinarySI, "1Ei"),
            ("7Ei", 7 * ki.pow(6) * N, BinarySI, "7Ei"),
            ("-7Ei", -7 * ki.pow(6) * N, BinarySI, "-7Ei"),
            ("8191Pi", 8191 * ki.pow(5) * N, BinarySI, "8191Pi"),
            ("1e3", 1_000 * N, DecimalExponent, "1e3"),
            ("1E3", 1_000 * N, DecimalExponent, "1e3"),
            ("1e+3", 1_000 * N, DecimalExponent, "1e3"),
            ("1e003", 1_000 * N, DecimalExponent, "1e3"),
            ("1000e0", 1_000 * N, DecimalExponent, "1e3"),
            ("1e0", N, DecimalExponent, "1"),
            ("1e2", 100 * N, DecimalExponent, "100"),
            ("1e-2", 10_000_000, DecimalExponent, "10e-3"),
            ("1e-3", 1_000_000, DecimalExponent, "1e-3"),
            ("5e-3", 5_000_000, DecimalExponent, "5e-3"),
            ("1e-9", 1, DecimalExponent, "1e-9"),
            ("1e-10", 1, DecimalExponent, "1e-9"),
            ("12e6", 12_000_000 * N, DecimalExponent, "12e6"),
            ("1.5e3", 1_500 * N, DecimalExponent, "1500"),
            (".5e1", 5 * N, DecimalExponent, "5"),
            ("1.e3", 1_000 * N, DecimalExponent, "1e3"),
            ("1e18", 10i128.pow(27), DecimalExponent, "1e18"),
            ("-1e-3", -1_000_000, DecimalExponent, "-1e-3"),
            (
                "1e-99999999999999999999999999999999999",
                1,
                DecimalExponent,
                "1e-9",
            ),
            (
                "0e99999999999999999999999999999999999",
                0,
                DecimalExponent,
                "0",
            ),
            ("1.5Gi", 1536 * ki.pow(2) * N, BinarySI, "1536Mi"),
            ("1536Mi", 1536 * ki.pow(2) * N, BinarySI, "1536Mi"),
            ("1024Mi", ki.pow(3) * N, BinarySI, "1Gi"),
            ("100Mi", 100 * ki.pow(2) * N, BinarySI, "100Mi"),
            ("12Mi", 12 * ki.pow(2) * N, BinarySI, "12Mi"),
            ("1.5Ki", 1536 * N, BinarySI, "1536"),
            ("-1Ki", -ki * N, BinarySI, "-1Ki"),
            ("-1.5Ki", -1536 * N, BinarySI, "-1536"),
            ("0.5Ki", 512 * N, BinarySI, "512"),
            ("1.1Ki", 11264 * N / 10, BinarySI, "1126400m"),
            ("0.0001Ki", 102_400_000, DecimalSI, "102400u"),
            ("0.0000000005Ki", 512, DecimalSI, "512n"),
            ("0.00000000001Ki", 11, DecimalSI, "11n"),
            (
                "1.0000000000000000000000001Ki",
                ki * N + 1,
                BinarySI,
                "1024000000001n",
            ),
            ("1.G", 10i128.pow(18), DecimalSI, "1G"),
            (".5", N / 2, DecimalSI, "500m"),
            ("5.", 5 * N, DecimalSI, "5"),
            ("0.1m", 100_000, DecimalSI, "100u"),
            ("1.5n", 2, DecimalSI, "2n"),
            ("0.1n", 1, DecimalSI, "1n"),
            ("-1.5n", -2, DecimalSI, "-2n"),
            ("-100m", -100_000_000, DecimalSI, "-100m"),
            ("1000m", N, DecimalSI, "1"),
            ("1500m", 1_500_000_000, DecimalSI, "1500m"),
            ("0.5", N / 2, DecimalSI, "500m"),
            ("1.5", 3 * N / 2, DecimalSI, "1500m"),
            ("2000", 2_000 * N, DecimalSI, "2k"),
            ("1500", 1_500 * N, DecimalSI, "1500"),
            ("1000000", 1_000_000 * N, DecimalSI, "1M"),
            ("0.1", N / 10, DecimalSI, "100m"),
            ("1.0000000001", N + 1, DecimalSI, "1000000001n"),
            ("1.00000000000000000001", N + 1, DecimalSI, "1000000001n"),
            ("0.0000000001", 1, DecimalSI, "1n"),
            ("1000000000000000000", 10i128.pow(27), DecimalSI, "1E"),
            ("9E", 9 * 10i128.pow(27), DecimalSI, "9E"),
            (
                "9223372036854775807",
                MAX_NANOS,
                DecimalSI,
                "9223372036854775807",
            ),
            (
                "-9223372036854775807",
                -MAX_NANOS,
                DecimalSI,
                "-9223372036854775807",
            ),
            (
                "9223372036854775806.999999999",
                MAX_NANOS - 1,
                DecimalSI,
                "9223372036854775806999999999n",
            ),
            (
                "9223372036854775.807k",
                MAX_NANOS,
                DecimalSI,
                "9223372036854775807",
            ),
        ];
        for &(input, nanos, format, canonical) in cases {
            let parsed = q(input);
            assert_eq!(parsed.nanos(), nanos, "nanos of {input:?}");
            assert_eq!(parsed.format(), format, "format of {input:?}");
            assert_eq!(
                parsed.to_canonical_string(),
                canonical,
                "canonical of {input:?}"
            );
            assert_eq!(parsed.to_string(), canonical, "Display of {input:?}");
            assert_eq!(input.parse::<Quantity>(), Ok(parsed));
        }
    }

    #[test]
    fn long_inputs() {
        let zeros = "0".repeat(1_000_000);
        assert_eq!(q(&format!("{zeros}1")).nanos(), N);
        assert_eq!(q(&format!("{zeros}1.5{zeros}Gi")).to_string(), "1536Mi");
        assert_eq!(q(&format!("0.{zeros}1")).to_string(), "1n");
        assert_eq!(q(&format!("0.{zeros}1Ei")).to_string(), "1n");
        assert_eq!(q(&format!("1.{zeros}")).to_string(), "1");
        assert_eq!(q(&format!("1.{zeros}1")).nanos(), N + 1);
        assert_eq!(q(&format!("1.{zeros}1Ki")).nanos(), 1024 * N + 1);
        assert_eq!(q(&format!("1{zeros}e-1000000")).to_string(), "1");
        assert_eq!(q(&format!("1{zeros}e-1000003")).to_string(), "1e-3");
        assert_eq!(q(&format!("1e{zeros}3")).to_string(), "1e3");
        let nines = "9".repeat(1_000_000);
        assert_eq!(q(&format!("0.{nines}")).nanos(), N);
        assert_eq!(q(&format!("0.{nines}Ki")).nanos(), 1024 * N);
        assert_eq!(q(&format!("{nines}e-1000009")).nanos(), 1);
        assert!(matches!(
            Quantity::parse(&nines),
            Err(QuantityError::OutOfRange {
                negative: false,
                ..
            })
        ));
    }

    #[test]
    fn from_constructors() {
        use Format::*;
        let cases: &[(Quantity, &str)] = &[
            (Quantity::from_value(100, BinarySI), "100"),
            (Quantity::from_value(1023, BinarySI), "1023"),
            (Quantity::from_value(1024, BinarySI), "1Ki"),
            (Quantity::from_value(-1024, BinarySI), "-1Ki"),
            (Quantity::from_value(2048, BinarySI), "2Ki"),
            (Quantity::from_value(3 << 30, BinarySI), "3Gi"),
            (Quantity::from_value(1024, DecimalSI), "1024"),
            (Quantity::from_value(5000, DecimalSI), "5k"),
            (Quantity::from_value(5, DecimalExponent), "5"),
            (Quantity::from_value(5000, DecimalExponent), "5e3"),
            (
                Quantity::from_value(i64::MAX, BinarySI),
                "9223372036854775807",
            ),
            (
                Quantity::from_value(i64::MIN, DecimalSI),
                "-9223372036854775807",
            ),
            (Quantity::from_milli(1500, BinarySI), "1500m"),
            (Quantity::from_milli(1500, DecimalSI), "1500m"),
            (Quantity::from_milli(2_048_000, BinarySI), "2Ki"),
            (Quantity::from_milli(-250, DecimalSI), "-250m"),
            (Quantity::from_milli(0, BinarySI), "0"),
            (Quantity::ZERO, "0"),
        ];
        for (quantity, canonical) in cases {
            assert_eq!(quantity.to_canonical_string(), *canonical, "{quantity:?}");
        }
        assert_eq!(Quantity::from_value(7, DecimalSI).value(), 7);
        assert_eq!(Quantity::from_milli(7, DecimalSI).milli_value(), 7);
        assert_eq!(Quantity::ZERO.format(), DecimalSI);
        assert!(Quantity::ZERO.is_zero() && !Quantity::ZERO.is_negative());
        assert!(q("-1n").is_negative() && !q("-1n").is_zero());
    }

    /// `mul_div`'s 64-bit path gives what 128-bit arithmetic gives, on
    /// both sides of where it hands over, signs included.
    #[test]
    fn mul_div_agrees_with_128_bit_arithmetic() {
        let big = i128::from(i64::MAX);
        let values = [
            0,
            1,
            -1,
            7,
            -7,
            1000,
            1024,
            999_999,
            big / 1024,
            big / 1024 + 1,
            big / 1000 + 1,
            3_037_000_499,
            3_037_000_500,
            big,
            -big,
            -big - 1,
            big + 1,
            1 << 70,
            // Times 2: exactly i64::MIN, then divided by -1.
            -(1 << 62),
        ];
        for a in values {
            for b in [
                0,
                1,
                -1,
                2,
                1000,
                1024,
                -1024,
                100_000,
                3_037_000_500,
                big,
                -big - 1,
            ] {
                for d in [1, -1, 3, 1000, 1024, -7, big, 1 << 66] {
                    let Some(product) = a.checked_mul(b) else {
                        continue;
                    };
                    assert_eq!(mul_div(a, b, d), product / d, "{a} * {b} / {d}");
                }
            }
        }
    }

    /// Around the largest value whose nanos fit an i64, where the 64-bit
    /// paths of `from_value` and `to_canonical_string` hand over to the
    /// 128-bit ones, both give what the 128-bit arithmetic gives.
    #[test]
    fn the_64_bit_paths_agree_with_128_bit_arithmetic() {
        let edge = i64::MAX / 1_000_000_000;
        for v in [
            edge - 1,
            edge,
            edge + 1,
            -edge - 1,
            -edge,
            -edge + 1,
            i64::MAX,
            1 << 40,
        ] {
            assert_eq!(
                Quantity::from_value(v, Format::DecimalSI).nanos(),
                i128::from(v) * N,
                "{v}"
            );
        }
        assert_eq!(
            Quantity::from_value(i64::MIN, Format::DecimalSI).nanos(),
            -MAX_NANOS
        );
        let cases: &[(&str, &str)] = &[
            ("9223372036854775807n", "9223372036854775807n"),
            ("9223372036854775808n", "9223372036854775808n"),
            ("-9223372036854775808n", "-9223372036854775808n"),
            ("-9223372036854775809n", "-9223372036854775809n"),
            ("9223372036", "9223372036"),
            ("9223372037", "9223372037"),
            ("9223372036000m", "9223372036"),
            ("9223372037000m", "9223372037"),
            ("8Gi", "8Gi"),
            ("9Gi", "9Gi"),
            ("8796093022208Ki", "8Pi"),
            ("-9Gi", "-9Gi"),
        ];
        for (input, canonical) in cases {
            assert_eq!(q(input).to_canonical_string(), *canonical, "{input}");
        }
    }

    #[test]
    fn value_rounds_up() {
        let cases: &[(&str, i64, Option<i64>)] = &[
            ("0", 0, Some(0)),
            ("1", 1, Some(1000)),
            ("100m", 1, Some(100)),
            ("1.5", 2, Some(1500)),
            ("-1.5", -1, Some(-1500)),
            ("-100m", 0, Some(-100)),
            ("1n", 1, Some(1)),
            ("-1n", 0, Some(0)),
            ("0.1m", 1, Some(1)),
            ("1.5m", 1, Some(2)),
            ("-1.5m", 0, Some(-1)),
            ("1Ki", 1024, Some(1_024_000)),
            ("1.5Gi", 1_610_612_736, Some(1_610_612_736_000)),
            ("9223372036854775807", i64::MAX, None),
            ("-9223372036854775807", -i64::MAX, None),
            (
                "9223372036854775",
                9_223_372_036_854_775,
                Some(9_223_372_036_854_775_000),
            ),
            (
                "9223372036854775807m",
                9_223_372_036_854_776,
                Some(i64::MAX),
            ),
            ("9223372036854775808m", 9_223_372_036_854_776, None),
            (
                "-9223372036854775808m",
                -9_223_372_036_854_775,
                Some(i64::MIN),
            ),
            ("7Ei", 7 << 60, None),
        ];
        for &(input, value, milli) in cases {
            let parsed = q(input);
            assert_eq!(parsed.value(), value, "value of {input:?}");
            assert_eq!(
                parsed.checked_milli_value(),
                milli,
                "checked_milli_value of {input:?}"
            );
            let saturated = milli.unwrap_or(if parsed.is_negative() {
                i64::MIN
            } else {
                i64::MAX
            });
            assert_eq!(parsed.milli_value(), saturated, "milli_value of {input:?}");
        }
    }

    #[test]
    fn round_up_to_milli_and_default() {
        let cases = [
            ("1.0001", "1001m", Format::DecimalSI),
            ("1500m", "1500m", Format::DecimalSI),
            ("1n", "1m", Format::DecimalSI),
            ("-1.5m", "-2m", Format::DecimalSI),
            ("-1n", "-1m", Format::DecimalSI),
            ("0", "0", Format::DecimalSI),
            ("1.0000001Gi", "1073741931375m", Format::BinarySI),
            ("1Gi", "1Gi", Format::BinarySI),
            ("1e-7", "1e-3", Format::DecimalExponent),
            (
                "9223372036854775806.9999999",
                "9223372036854775807",
                Format::DecimalSI,
            ),
        ];
        for (input, rounded, format) in cases {
            let result = q(input).round_up_to_milli();
            assert_eq!(
                (result.to_string().as_str(), result.format()),
                (rounded, format),
                "{input:?}"
            );
        }
        assert_eq!(Quantity::default(), Quantity::ZERO);
        assert_eq!(Quantity::default().format(), Format::DecimalSI);
        assert_eq!(format!("[{:>6}]", q("1.5Gi")), "[1536Mi]");
        assert_eq!(format!("[{:>8}]", q("1.5")), "[   1500m]");
    }

    fn hash_of(quantity: Quantity) -> u64 {
        let mut hasher = DefaultHasher::new();
        quantity.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn semantic_equality() {
        let pairs = [
            ("1Gi", "1024Mi"),
            ("1", "1000m"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("1Ki", "1024"),
            ("0.5", "500m"),
            ("1E", "1e18"),
            ("0", "0Ki"),
            ("-0", "0e5"),
            ("1n", "0.1n"),
            ("1.5Gi", "1536Mi"),
        ];
        for (a, b) in pairs {
            assert_eq!(q(a), q(b), "{a} == {b}");
            assert_eq!(hash_of(q(a)), hash_of(q(b)), "hash {a} == {b}");
            assert_eq!(q(a).cmp(&q(b)), Ordering::Equal);
        }
        assert_ne!(q("1k"), q("1Ki"));
        assert_ne!(q("1n"), q("2n"));
    }

    #[test]
    fn ordering() {
        assert!(q("1m") < q("1"));
        assert!(q("-1") < q("0"));
        assert!(q("1Ki") > q("1k"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("-7Ei") < q("-1E"));
        let mut list: Vec<Quantity> = ["1Gi", "-1", "500m", "1k", "0", "1Ki", "1e-9", "1E"]
            .map(q)
            .to_vec();
        list.sort();
        let sorted: Vec<String> = list.iter().map(Quantity::to_canonical_string).collect();
        assert_eq!(
            sorted,
            ["-1", "0", "1e-9", "500m", "1k", "1Ki", "1Gi", "1E"]
        );

        let (a, b) = (q("1Gi"), q("1073741824"));
        assert_eq!(a.max(b).format(), Format::BinarySI, "ties keep self");
        assert_eq!(b.max(a).format(), Format::DecimalSI, "ties keep self");
        assert_eq!(a.min(b).format(), Format::BinarySI, "ties keep self");
        assert_eq!(q("1").max(q("2k")).to_string(), "2k");
        assert_eq!(q("1").min(q("2k")).to_string(), "1");
        assert_eq!(q("-1Ki").min(q("1m")).to_string(), "-1Ki");
    }

    fn invalid(input: &str) -> SyntaxError {
        match Quantity::parse(input) {
            Err(QuantityError::Invalid { reason, .. }) => reason,
            other => panic!("{input:?}: expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn errors() {
        use SyntaxError::*;
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        let unknown = |s: &str| UnknownSuffix(s.to_owned());
        let cases: &[(&str, SyntaxError)] = &[
            (" 1", Whitespace),
            ("1 ", Whitespace),
            ("1 Gi", Whitespace),
            ("1\t", Whitespace),
            ("\u{a0}1", Whitespace),
            ("abc", MissingNumber),
            ("-", MissingNumber),
            ("+", MissingNumber),
            (".", MissingNumber),
            ("-.", MissingNumber),
            ("Ki", MissingNumber),
            ("m", MissingNumber),
            ("NaN", MissingNumber),
            ("inf", MissingNumber),
            ("-inf", MissingNumber),
            ("١", MissingNumber),
            ("--1", MultipleSigns),
            ("+-1", MultipleSigns),
            ("-+1", MultipleSigns),
            ("1.2.3", MultipleDecimalPoints),
            ("1..", MultipleDecimalPoints),
            ("1.5.Gi", MultipleDecimalPoints),
            ("1Kib", unknown("Kib")),
            ("1KI", unknown("KI")),
            ("1ki", unknown("ki")),
            ("1K", unknown("K")),
            ("1mi", unknown("mi")),
            ("0.1am", unknown("am")),
            ("1i", unknown("i")),
            ("1x", unknown("x")),
            ("12x", unknown("x")),
            ("0x10", unknown("x10")),
            ("1_000", unknown("_000")),
            ("1+1.0M", unknown("+1.0M")),
            ("1-", unknown("-")),
            ("1١", unknown("١")),
            ("1ex", unknown("ex")),
            ("1Ee3", unknown("Ee3")),
            ("1e", MissingExponent),
            ("1E+", MissingExponent),
            ("-3.01e-", MissingExponent),
            ("1e1.5", InvalidExponent("1.5".to_owned())),
            ("1e3Ki", InvalidExponent("3Ki".to_owned())),
            ("1e-3.", InvalidExponent("-3.".to_owned())),
        ];
        for (input, reason) in cases {
            assert_eq!(&invalid(input), reason, "{input:?}");
        }
        let out_of_range = [
            ("8Ei", false),
            ("-8Ei", true),
            ("9Ei", false),
            ("8192Pi", false),
            ("9223372036854775808", false),
            ("-9223372036854775808", true),
            ("9223372036854775807.000000001", false),
            ("9223372036854775807.0000000000001", false),
            ("9223372036854775.808k", false),
            ("1e19", false),
            ("10E", false),
            (
                "99999999999999999999999999999999999999999999e99999999",
                false,
            ),
            ("1e99999999999999999999999999999999999999999", false),
            ("-1e99999999999999999999999999999999999999999", true),
            ("99999999999999999999999999999999999999999999Ei", false),
            ("9223372036854775807Ki", false),
        ];
        for (input, negative) in out_of_range {
            match Quantity::parse(input) {
                Err(QuantityError::OutOfRange { negative: n, .. }) => {
                    assert_eq!(n, negative, "{input:?}")
                }
                other => panic!("{input:?}: expected out of range, got {other:?}"),
            }
        }
        let huge = "1".repeat(1_000_000);
        assert!(matches!(
            Quantity::parse(&huge),
            Err(QuantityError::OutOfRange {
                negative: false,
                ..
            })
        ));
    }

    #[test]
    fn error_messages() {
        let message = |s: &str| Quantity::parse(s).unwrap_err().to_string();
        assert_eq!(message(""), "quantity is empty");
        assert_eq!(
            message("12x"),
            "`12x` is not a valid quantity: unknown suffix `x` (expected one of n, u, m, k, M, G, \
             T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
        );
        assert_eq!(
            message("1.2.3"),
            "`1.2.3` is not a valid quantity: more than one decimal point"
        );
        assert_eq!(
            message(" 1"),
            "` 1` is not a valid quantity: whitespace is not allowed"
        );
        assert_eq!(
            message("1\n"),
            "`1\\n` is not a valid quantity: whitespace is not allowed"
        );
        assert_eq!(
            message("1e1.5"),
            "`1e1.5` is not a valid quantity: exponent `1.5` is not an integer"
        );
        assert_eq!(
            message("9Ei"),
            "`9Ei` is too large: quantities must be at most 2^63-1 (9223372036854775807)"
        );
        assert_eq!(
            message("-9Ei"),
            "`-9Ei` is too small: quantities must be at least -(2^63-1) (-9223372036854775807)"
        );
        let huge = format!("{}é", "9".repeat(10_000_000));
        let text = message(&huge);
        assert_eq!(
            text,
            format!(
                "`{}…` is not a valid quantity: {}",
                "9".repeat(40),
                unknown_suffix_text("é")
            )
        );
        let huge_number = message(&"9".repeat(1_000_000));
        assert!(
            huge_number.starts_with(&format!("`{}…` is too large", "9".repeat(40))),
            "{huge_number}"
        );
        assert!(huge_number.len() < 200);
        // Exactly 40 characters are echoed whole; multi-byte characters are never split.
        let forty = format!("{}x", "é".repeat(39));
        assert!(message(&forty).starts_with(&format!("`{forty}` ")));
        let forty_one = format!("1{}", "é".repeat(40));
        assert!(message(&forty_one).starts_with(&format!("`1{}…` ", "é".repeat(39))));
        let error: &dyn core::error::Error = &QuantityError::Empty;
        assert_eq!(error.to_string(), "quantity is empty");
    }

    fn unknown_suffix_text(suffix: &str) -> String {
        SyntaxError::UnknownSuffix(suffix.to_owned()).to_string()
    }

    #[test]
    fn arithmetic() {
        let sum = q("1Gi").checked_add(q("500M")).unwrap();
        assert_eq!(
            (sum.format(), sum.value()),
            (Format::BinarySI, 1_573_741_824)
        );
        assert_eq!(sum.to_string(), "1573741824");
        let sum = q("500M").checked_add(q("1Gi")).unwrap();
        assert_eq!(
            (sum.format(), sum.to_string().as_str()),
            (Format::DecimalSI, "1573741824")
        );
        assert_eq!(q("1Gi").checked_add(q("1Gi")).unwrap().to_string(), "2Gi");
        assert_eq!(
            q("1Gi").checked_add(q("512Mi")).unwrap().to_string(),
            "1536Mi"
        );
        assert_eq!(q("1").checked_add(q("500m")).unwrap().to_string(), "1500m");
        assert_eq!(q("1e3").checked_add(q("1k")).unwrap().to_string(), "2e3");
        assert_eq!(q("1").checked_sub(q("1500m")).unwrap().to_string(), "-500m");
        assert_eq!(q("2Gi").checked_sub(q("1Gi")).unwrap().to_string(), "1Gi");
        // A zero receiver takes the other operand's format (upstream Add/Sub).
        let total = [q("1Gi"), q("512Mi")]
            .into_iter()
            .try_fold(Quantity::ZERO, Quantity::checked_add)
            .unwrap();
        assert_eq!(
            (total.format(), total.to_string().as_str()),
            (Format::BinarySI, "1536Mi")
        );
        assert_eq!(
            Quantity::ZERO.checked_sub(q("1Gi")).unwrap().to_string(),
            "-1Gi"
        );
        assert_eq!(
            q("1Gi").checked_sub(q("1Gi")).unwrap().format(),
            Format::BinarySI
        );

        let max = q("9223372036854775807");
        assert_eq!(max.checked_add(q("0")), Ok(max));
        assert_eq!(q("7Ei").checked_add(q("-7Ei")), Ok(Quantity::ZERO));
        let overflow = q("7Ei").checked_add(q("7Ei")).unwrap_err();
        assert_eq!(
            overflow,
            QuantityError::Overflow {
                op: ArithmeticOp::Add,
                lhs: q("7Ei"),
                rhs: q("7Ei")
            }
        );
        assert_eq!(
            overflow.to_string(),
            "the result of `7Ei + 7Ei` is too large: quantities must be at most 2^63-1 (9223372036854775807)"
        );
        assert!(max.checked_add(q("1n")).is_err());
        let underflow = q("-7Ei").checked_sub(q("7Ei")).unwrap_err();
        assert_eq!(
            underflow.to_string(),
            "the result of `-7Ei - 7Ei` is too small: quantities must be at least -(2^63-1) (-9223372036854775807)"
        );

        assert_eq!(q("7Ei").saturating_add(q("7Ei")), max);
        assert_eq!(q("7Ei").saturating_add(q("7Ei")).format(), Format::BinarySI);
        assert_eq!(q("7Ei").saturating_add(q("7Ei")).value(), i64::MAX);
        assert_eq!(q("-7Ei").saturating_sub(q("7Ei")).value(), -i64::MAX);
        assert_eq!(q("1").saturating_sub(q("250m")).to_string(), "750m");
        assert_eq!(Quantity::ZERO.saturating_add(q("2Ki")).to_string(), "2Ki");
    }

    /// A tiny deterministic linear congruential generator (Knuth's MMIX constants).
    struct Lcg(u64);

    impl Lcg {
        fn step(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 11
        }

        fn below(&mut self, n: u64) -> u64 {
            self.step() % n
        }
    }

    /// Exact expected nanos for `±int.frac * 10^exp10 * 1024^k`, rounded away from zero,
    /// computed independently from the parser (small operands only).
    fn oracle(negative: bool, int: u64, frac: &str, exp10: i32, k: u32) -> Option<i128> {
        // `den` stays below 10^7 whenever `num` grows, so an overflowing `num` means a value
        // far above 2^63-1 units: report it as out of range.
        let frac_value: i128 = if frac.is_empty() {
            0
        } else {
            frac.parse().unwrap()
        };
        let mut den = 10i128.pow(frac.len() as u32);
        let mut num = (i128::from(int) * den + frac_value)
            .checked_mul(NANOS_PER_UNIT)?
            .checked_mul(1i128 << (10 * k))?;
        if exp10 >= 0 {
            num = num.checked_mul(10i128.pow(exp10 as u32))?;
        } else {
            den *= 10i128.pow(exp10.unsigned_abs());
        }
        let magnitude = div_ceil(num, den);
        (magnitude <= MAX_NANOS).then_some(if negative { -magnitude } else { magnitude })
    }

    /// Printing the re-parsed canonical string gives it back, except that a BinarySI value
    /// printed without a binary suffix re-parses as DecimalSI (BinarySI 274880000 prints as
    /// `274880000`, which re-prints as `274880k`); that second string is then a fixed point.
    fn assert_stable(original: Quantity, canonical: &str, again: Quantity) {
        let reprinted = again.to_canonical_string();
        if original.format() == Format::BinarySI && again.format() == Format::DecimalSI {
            assert_eq!(
                q(&reprinted).to_canonical_string(),
                reprinted,
                "{original:?} -> {canonical}"
            );
            assert_eq!(q(&reprinted), original);
        } else {
            assert_eq!(reprinted, canonical, "{original:?}");
        }
    }

    #[test]
    fn random_round_trip() {
        const SUFFIXES: [(&str, i32, u32); 16] = [
            ("n", -9, 0),
            ("u", -6, 0),
            ("m", -3, 0),
            ("", 0, 0),
            ("k", 3, 0),
            ("M", 6, 0),
            ("G", 9, 0),
            ("T", 12, 0),
            ("P", 15, 0),
            ("E", 18, 0),
            ("Ki", 0, 1),
            ("Mi", 0, 2),
            ("Gi", 0, 3),
            ("Ti", 0, 4),
            ("Pi", 0, 5),
            ("Ei", 0, 6),
        ];
        let mut rng = Lcg(0x5eed_1234_abcd_0042);
        let mut parsed_ok = 0;
        for _ in 0..20_000 {
            let negative = rng.below(4) == 0;
            let int = match rng.below(4) {
                0 => rng.below(10),
                1 => rng.below(1 << 20),
                2 => rng.below(10_000) * 1024,
                _ => rng.below(10_000_000),
            };
            let frac: String = (0..rng.below(8))
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect();
            let (suffix, exp10, k) = if rng.below(5) == 0 {
                let e = rng.below(31) as i32 - 12;
                (format!("e{e}"), e, 0)
            } else {
                let (s, e, k) = SUFFIXES[rng.below(16) as usize];
                (s.to_owned(), e, k)
            };
            let sign = if negative {
                "-"
            } else if rng.below(8) == 0 {
                "+"
            } else {
                ""
            };
            let dot = if frac.is_empty() && rng.below(2) == 0 {
                ""
            } else {
                "."
            };
            let text = format!("{sign}{int}{dot}{frac}{suffix}");
            let expected = oracle(negative, int, &frac, exp10, k);
            let parsed = Quantity::parse(&text);
            match (expected, parsed) {
                (Some(nanos), Ok(quantity)) => {
                    assert_eq!(quantity.nanos(), nanos, "{text}");
                    let canonical = quantity.to_canonical_string();
                    let again = q(&canonical);
                    assert_eq!(again, quantity, "{text} -> {canonical}");
                    assert_stable(quantity, &canonical, again);
                    parsed_ok += 1;
                }
                (None, Err(QuantityError::OutOfRange { negative: n, .. })) => {
                    assert_eq!(n, negative, "{text}")
                }
                (expected, parsed) => panic!("{text}: expected {expected:?}, got {parsed:?}"),
            }
        }
        assert!(parsed_ok > 15_000, "{parsed_ok}");

        // Random exact values in every format survive canonical -> parse unchanged.
        let formats = [Format::DecimalSI, Format::BinarySI, Format::DecimalExponent];
        for _ in 0..20_000 {
            let magnitude = match rng.below(4) {
                0 => i128::from(rng.below(1 << 20)) << (10 * rng.below(6)),
                1 => i128::from(rng.below(1_000_000)) * 10i128.pow(rng.below(22) as u32),
                2 => i128::from(rng.step()) * i128::from(rng.step()) % (MAX_NANOS + 1),
                _ => i128::from(rng.below(1 << 53)) * NANOS_PER_UNIT,
            };
            let nanos = if rng.below(3) == 0 {
                -magnitude
            } else {
                magnitude
            };
            let quantity = Quantity {
                nanos,
                format: formats[rng.below(3) as usize],
            };
            let canonical = quantity.to_canonical_string();
            let again = q(&canonical);
            assert_eq!(again.nanos(), nanos, "{quantity:?} -> {canonical}");
            assert_stable(quantity, &canonical, again);
        }
    }
}
